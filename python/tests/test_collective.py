"""Collectives and tensor declarations from Python: allreduce, allgather,
reducescatter and broadcast over process actors of the test module's
gpu_stage class (member i's tensor is stage i + 1 of the input), on host
actors and on emulated devices, checked against numpy."""
import numpy as np
import pytest

import adag
from tensor_util import sample, stage, stage_actor, tensor_actor


def members(rt, n, devices=None):
    return [stage_actor(rt, i + 1, device=devices[i] if devices else None, name=f"tp{i}")
            for i in range(n)]


def build(rt, actors, kind, **kw):
    """input 0 -> member i: apply (stage i + 1) -> the collective -> every output"""
    g = rt.graph()
    x = g.input(0).tensor()
    parts = [g.bind(a, "apply", x).tensor() for a in actors]
    outs = getattr(g, kind)(parts, **kw)
    assert isinstance(outs, tuple) and len(outs) == len(actors)
    g.output(*outs)
    return g.compile(max_inflight=2)


def run(dag, x):
    with dag.get(dag.execute(x), timeout=30) as outs:
        return [(o.dtype, o.shape, np.asarray(o).copy()) for o in outs]


@pytest.mark.parametrize("dtype", ["int32", "float32", "int8", "float64"])
def test_allreduce_sum_on_host_actors(rt, dtype):
    actors = members(rt, 3)
    dag = build(rt, actors, "allreduce")
    for seed in range(3):
        x = sample(dtype, (6,), seed=seed)
        expect = stage(x, 1) + stage(x, 2) + stage(x, 3)
        for dt, shape, got in run(dag, x):
            assert dt == dtype and shape == (6,)
            assert np.array_equal(got, expect)


@pytest.mark.parametrize("op,combine", [
    ("prod", lambda a, b: a * b), ("min", np.minimum), ("max", np.maximum),
    ("avg", lambda a, b: (a.astype(np.int64) + b) // 2)])
def test_allreduce_ops(rt, op, combine):
    actors = members(rt, 2)
    dag = build(rt, actors, "allreduce", op=op)
    x = np.array([1, 5, 9, 20], dtype=np.int32)   # non-negative: avg truncates alike
    expect = combine(stage(x, 1), stage(x, 2)).astype(np.int32)
    for _, _, got in run(dag, x):
        assert np.array_equal(got, expect)


def test_allgather_reducescatter_broadcast(rt):
    actors = members(rt, 2)
    x = sample("float32", (4,), seed=9)
    s1, s2 = stage(x, 1), stage(x, 2)
    gathered = run(build(rt, actors, "allgather"), x)
    for _, shape, got in gathered:
        assert shape == (8,) and np.array_equal(got, np.concatenate([s1, s2]))
    scattered = run(build(rt, actors, "reducescatter", op="sum"), x)
    for i, (_, shape, got) in enumerate(scattered):
        assert shape == (2,) and np.array_equal(got, (s1 + s2)[2 * i:2 * i + 2])
    for root, expect in ((0, s1), (1, s2)):
        for _, _, got in run(build(rt, actors, "broadcast", root=root), x):
            assert np.array_equal(got, expect)


def test_allreduce_on_emulated_devices(rt):
    actors = members(rt, 2, devices=["emu:0", "emu:1"])
    dag = build(rt, actors, "allreduce", op="max")
    for seed in range(3):
        x = sample("float64", (5,), seed=seed)
        for _, shape, got in run(dag, x):
            assert shape == (5,) and np.array_equal(got, np.maximum(stage(x, 1), stage(x, 2)))


def test_collective_misuse(rt):
    actors = members(rt, 2)
    g = rt.graph()
    x = g.input(0).tensor()
    parts = [g.bind(a, "apply", x).tensor() for a in actors]
    with pytest.raises(ValueError, match="'median': one of sum, prod, min, max, avg"):
        g.allreduce(parts, op="median")
    other = rt.graph().input(0)
    with pytest.raises(TypeError, match="not a node of this graph"):
        g.allgather([parts[0], other])
    with pytest.raises(TypeError, match="not a sequence"):
        g.allgather(parts[0])
    with pytest.raises(adag.InvalidError):
        g.allreduce(parts[:1])                 # one member
    with pytest.raises(adag.InvalidError):
        g.broadcast(parts, root=2)
    with pytest.raises(ValueError, match="transport 'fast'|'fast': one of auto"):
        g.tensor(parts[0], transport="fast")
    with pytest.raises(ValueError, match="negative"):
        parts[0].tensor(shape=(2, -1))


def test_tensor_and_channel_declarations(rt):
    a = tensor_actor(rt)
    g = rt.graph()
    x = g.input(0)
    assert x.tensor(dtype=np.int16, shape=(3,), transport="host") is x
    assert g.channel(x, max_bytes=6) is x
    g.output(g.bind(a, "interleave", x).channel(max_bytes=12, slots=2))
    dag = g.compile(max_inflight=2)
    assert "input[0]" in dag.dot()
    with pytest.raises(adag.InvalidError, match="declared i16"):
        dag.execute(np.zeros(3, np.int32))
    assert len(dag.execute(np.zeros(3, np.int16)).get(timeout=10)[0]) == 12
    # a static tensor larger than its channel's max_bytes cannot compile
    g2 = rt.graph()
    y = g2.input(0).tensor("float32", (4,)).channel(max_bytes=8)
    g2.output(g2.bind(a, "interleave", y))
    with pytest.raises(adag.InvalidError, match="16|8"):
        g2.compile()
    # slots reach the library: fewer than max_inflight on an output is refused
    g3 = rt.graph()
    g3.output(g3.bind(a, "interleave", g3.input(0)).channel(slots=1))
    with pytest.raises(adag.InvalidError, match="asks for 1 slots"):
        g3.compile(max_inflight=2)
