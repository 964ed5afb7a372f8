"""Statistics (CompiledDAG.stats -> adag.DagStats), the trace
(CompiledDAG.write_trace: Chrome trace-event JSON), the DAG's settings
(CompiledDAG.config) and execute timeout."""
import dataclasses
import json

import pytest

import adag
from conftest import MODULE, as_i64, i64, one_stage


def chain(rt, counter, **compile_kw):
    """input -> fast.add -> slow.sleep_ms: slow is the bottleneck."""
    fast, slow = counter(0, name="fast"), counter(0, name="slow")
    g = rt.graph()
    g.output(g.bind(slow, "sleep_ms", g.bind(fast, "add", g.input(0))))
    return g.compile(**compile_kw)


def test_counts_without_a_snapshot(rt, counter):
    dag = one_stage(rt, counter(0), "fail_if_negative", max_inflight=3, name="counted")
    for x in range(5):
        assert as_i64(dag.execute(i64(x)).get(timeout=10)[0]) == x
    with pytest.raises(adag.MethodError):
        dag.execute(i64(-1)).get(timeout=10)
    dag.execute(i64(0)).release()
    s = dag.stats()
    assert isinstance(s, adag.DagStats) and dataclasses.is_dataclass(s)
    assert (s.name, s.executed, s.completed, s.failed, s.max_inflight) == ("counted", 7, 5, 1, 3)
    assert s.released == 7 and s.nchannels == 2 and s.shm_bytes > 0
    assert s.actors == () and s.ops == () and s.channels == () and s.text is None
    assert not s.timed and s.bottleneck == ""
    assert str(s).startswith("dag counted: executed 7, completed 5, failed 1, released 7")


def test_snapshot_of_a_traced_dag_names_the_bottleneck(rt, counter):
    dag = chain(rt, counter, trace_spans=256, max_inflight=2)
    for x in range(8):
        dag.execute(i64(3)).get(timeout=10)
    s = dag.stats(take=True)
    assert s.timed and s.executed == 8
    assert s.bottleneck == "slow" and 0 < s.bottleneck_busy <= 1
    actors = {a.name: a for a in s.actors}
    assert set(actors) == {"fast", "slow"}
    assert all(isinstance(a, adag.ActorStats) for a in s.actors)
    a = actors["slow"]
    assert (a.placement, a.device, a.nops, a.count, a.unanswered) == ("process", "host", 1, 8,
                                                                      None)
    assert a.busy_ns >= 8 * 2_500_000 and a.elapsed_ns >= a.busy_ns and a.busy > actors["fast"].busy
    ops = {(o.actor, o.name): o for o in s.ops}
    assert set(ops) == {("fast", "add"), ("slow", "sleep_ms")}
    op = ops[("slow", "sleep_ms")]
    assert op.count == 8 and op.index == 0
    assert 2_500_000 <= op.compute_p50_ns <= op.compute_max_ns and op.compute_mean_ns >= 2_500_000
    chans = {c.name: c for c in s.channels}
    assert set(chans) == {"input[0]", "fast.add[0]", "slow.sleep_ms[0]"}
    c = chans["input[0]"]
    assert (c.kind, c.writer, c.values, c.bytes, c.slots) == ("shm", "driver", 8, 64, 2)
    assert c.in_use == 0 and c.slot_bytes > 0 and c.host_bytes >= 2 * c.slot_bytes
    text = str(s)
    assert text == s.text and "bottleneck: actor slow" in text and "sleep_ms" in text
    assert "fast.add[0]" in text


def test_untraced_snapshot_has_counts_and_no_times(rt, counter):
    dag = chain(rt, counter)
    dag.execute(i64(1)).get(timeout=10)
    s = dag.stats(take=True)
    assert not s.timed and s.bottleneck == "" and s.bottleneck_busy == 0
    assert {a.name: a.count for a in s.actors} == {"fast": 1, "slow": 1}
    assert all(o.compute_ns == 0 and o.count == 1 for o in s.ops)


def test_write_trace_is_chrome_trace_json_naming_actors_and_methods(rt, counter, tmp_path):
    dag = chain(rt, counter, trace_spans=64, name="traced")
    for x in range(5):
        dag.execute(i64(1)).get(timeout=10)
    path = tmp_path / "trace.json"
    dag.write_trace(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert trace["otherData"]["dag"] == "traced"
    tracks = [e["args"]["name"] for e in events if e.get("name") == "process_name"]
    assert any(t.startswith("actor fast") for t in tracks)
    assert any(t.startswith("actor slow") for t in tracks)
    spans = [e for e in events if e.get("ph") == "X"]
    names = {e["name"] for e in spans}
    assert {"add", "sleep_ms", "execute", "get"} <= names
    assert all(e["dur"] >= 0 and "ts" in e for e in spans)
    # an actor records an op once it is done with it, which may be just
    # after the driver got its value: ref 4's is not waited for
    assert {0, 1, 2, 3} <= {e["args"]["ref"] for e in spans if e["name"] == "sleep_ms"}


def test_write_trace_refusals(rt, counter, tmp_path):
    dag = chain(rt, counter)
    with pytest.raises(adag.InvalidError, match="trac"):
        dag.write_trace(tmp_path / "untraced.json")
    assert not (tmp_path / "untraced.json").exists()  # no half a file left
    traced = one_stage(rt, counter(), "add", trace_spans=16)
    with pytest.raises(FileNotFoundError):
        traced.write_trace(tmp_path / "no" / "such" / "dir.json")


def test_runtime_setting_traces_every_dag(counter, tmp_path):
    with adag.Runtime(trace_spans=32) as rt2:
        a = rt2.actor("counter", module=MODULE, placement="process", init=i64(0))
        g = rt2.graph()
        g.output(g.bind(a, "add", g.input(0)))
        dag = g.compile()
        dag.execute(i64(1)).get(timeout=10)
        assert dag.config["ADAG_TRACE_SPANS"] == "32"
        assert dag.stats(take=True).timed
        dag.write_trace(tmp_path / "t.json")
        assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]


def test_config_and_execute_timeout(counter):
    with adag.Runtime(spin_ns=0, execute_timeout_ms=1234, max_inflight=3) as rt2:
        a = rt2.actor("counter", module=MODULE, placement="process", init=i64(0))
        g = rt2.graph()
        g.output(g.bind(a, "add", g.input(0)))
        dag = g.compile()
        cfg = dag.config
        assert isinstance(cfg, dict)
        assert cfg["ADAG_SPIN_NS"] == "0" and cfg["ADAG_EXECUTE_TIMEOUT_MS"] == "1234"
        assert cfg["ADAG_MAX_INFLIGHT"] == "3" and dag.stats().max_inflight == 3
        assert "ADAG_TOKEN" not in cfg  # a secret: never read back
        assert all(k.startswith("ADAG_") and isinstance(v, str) for k, v in cfg.items())
        assert dag.execute_timeout == pytest.approx(1.234)
        g2 = rt2.graph()
        g2.output(g2.bind(a, "add", g2.input(0)))
        assert g2.compile(execute_timeout=None).execute_timeout is None
        g3 = rt2.graph()
        g3.output(g3.bind(a, "add", g3.input(0)))
        assert g3.compile(execute_timeout=2.5).execute_timeout == 2.5
