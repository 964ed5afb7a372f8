"""compile(run_ahead=True): device-bound stages whose arguments are static
tensors from other device stages run ahead of their inputs (the C guide,
docs/guide/tensors-and-devices.md); such a DAG has its device actors to
itself."""
import numpy as np
import pytest

import adag
from tensor_util import stage, stage_actor


def chain(rt, actors, **compile_kw):
    g = rt.graph()
    x = g.input(0).tensor("float32", (64,))
    for a in actors:
        x = g.bind(a, "apply", x).tensor("float32", (64,))
    g.output(x)
    return g.compile(**compile_kw)


def test_run_ahead_results_and_exclusive_actors(rt):
    actors = [stage_actor(rt, 1, device="emu:0"), stage_actor(rt, 2, device="emu:0"),
              stage_actor(rt, 3, device="emu:1")]
    dag = chain(rt, actors, run_ahead=True, max_inflight=3)
    for seed in range(50):
        x = np.arange(64, dtype=np.float32) * (seed + 1) - 7
        (got,) = dag.execute(x).get(timeout=10)
        want = stage(stage(stage(x, 1), 2), 3)
        assert np.array_equal(np.frombuffer(got, np.float32), want)
    with pytest.raises(adag.BusyError, match="actor .* is in DAG .*runs ahead"):
        chain(rt, actors[:1])
    dag.close()
    plain = chain(rt, actors[:1])
    with pytest.raises(adag.BusyError, match="is still alive"):
        chain(rt, actors, run_ahead=True)
    plain.close()
