"""asyncio: execute_async, `await ref`, Ref.wait_async (adag/aio.py over the
DAG's fd): many executions in flight on one DAG, a full window waited for
without blocking the loop, cancellation and timeouts that leave no slot
behind, the reader gone once nobody waits."""
import asyncio
import os
import signal
import time

import pytest

import adag
from conftest import as_i64, i64, one_stage


def run(coro, timeout=60):
    async def bounded():
        return await asyncio.wait_for(coro, timeout)
    return asyncio.run(bounded())


def readers(loop):
    """The fds the loop's selector watches (its own self-pipe included)."""
    return set(loop._selector.get_map())


def test_execute_async_gives_the_outputs(rt, counter):
    dag = one_stage(rt, counter(5), "add")

    async def main():
        outs = await dag.execute_async(i64(1))
        assert isinstance(outs, list) and [as_i64(o) for o in outs] == [6]
        assert [as_i64(o) for o in await dag.execute_async(i64(-4), timeout=10)] == [1]
    run(main())


def test_method_failure_raises_from_execute_async(rt, counter):
    dag = one_stage(rt, counter(0, name="checker"), "fail_if_negative", max_inflight=2)

    async def main():
        with pytest.raises(adag.MethodError, match="negative input -3"):
            await dag.execute_async(i64(-3))
        # the failed ref was released: the window goes on
        for x in range(4):
            assert as_i64((await dag.execute_async(i64(x)))[0]) == x
    run(main())


def test_hundred_concurrent_executions_do_not_block_the_loop(rt, counter):
    # max_inflight 4: 96 of the 100 wait for room at first. A blocking
    # execute there would stop the loop (and the results it delivers); the
    # ticker shows the loop ran all along.
    dag = one_stage(rt, counter(5), "sleep_ms", max_inflight=4, execute_timeout=2)
    ticks = []

    async def ticker(stop):
        while not stop.is_set():
            ticks.append(time.monotonic())
            await asyncio.sleep(0.01)

    async def main():
        stop = asyncio.Event()
        t = asyncio.ensure_future(ticker(stop))
        t0 = time.monotonic()
        outs = await asyncio.gather(*(dag.execute_async(i64(5 + i % 3)) for i in range(100)))
        t1 = time.monotonic()
        stop.set()
        await t
        assert [as_i64(o[0]) for o in outs] == [5 + i % 3 for i in range(100)]
        return t0, t1
    t0, t1 = run(main())
    assert t1 - t0 > 0.5  # 100 sleeps of >= 5 ms, one actor
    during = [s for s in ticks if t0 < s < t1]
    assert len(during) >= (t1 - t0) / 0.01 / 4, f"{len(during)} ticks in {t1 - t0:.2f} s"
    assert adag.aio._watches == {}


def test_await_ref_and_wait_async(rt, counter):
    dag = one_stage(rt, counter(5), "sleep_ms", max_inflight=4)

    async def main():
        ref = dag.execute(i64(30))
        assert [as_i64(o) for o in await ref] == [30]
        with pytest.raises(ValueError, match="released"):
            await ref  # got once: released
        refs = [dag.execute(i64(10 * i)) for i in range(4)]
        # awaited in reverse order: each gets its own result as it completes
        outs = await asyncio.gather(*(r.wait_async(timeout=10) for r in reversed(refs)))
        assert [as_i64(o[0]) for o in outs] == [30, 20, 10, 0]
    run(main())


def test_wait_async_timeout_keeps_the_ref(rt, counter):
    dag = one_stage(rt, counter(), "sleep_ms")

    async def main():
        ref = dag.execute(i64(800))
        t0 = time.monotonic()
        with pytest.raises(adag.TimeoutError) as e:
            await ref.wait_async(timeout=0.1)
        assert time.monotonic() - t0 < 0.7
        assert e.value.status == -3 and isinstance(e.value, TimeoutError)
        assert [as_i64(o) for o in await ref] == [800]
    run(main())


def test_execute_async_timeout_releases_the_execution(rt, counter):
    # max_inflight 1: the next execution needs the slot of the one that
    # timed out, which comes back when it completes (it was released)
    dag = one_stage(rt, counter(), "sleep_ms", max_inflight=1, execute_timeout=5)

    async def main():
        with pytest.raises(adag.TimeoutError):
            await dag.execute_async(i64(500), timeout=0.1)
        assert [as_i64(o) for o in await dag.execute_async(i64(1), timeout=5)] == [1]
    run(main())


def test_cancelled_executions_leave_no_slot_behind(rt, counter):
    # 100 in flight on a window of 4, a third of them cancelled (running or
    # waiting for room). The cancelled tasks are kept (their tracebacks hold
    # their frames): only the release at cancellation gives their slots
    # back, and 100 more executions must find room, within the 5 s
    # execute timeout of each.
    dag = one_stage(rt, counter(5), "sleep_ms", max_inflight=4, execute_timeout=5)

    async def main():
        loop = asyncio.get_running_loop()
        before = readers(loop)
        tasks = [asyncio.ensure_future(dag.execute_async(i64(3))) for i in range(100)]
        await asyncio.sleep(0.05)
        cancelled = [t for i, t in enumerate(tasks) if i % 3 == 0]
        for t in cancelled:
            t.cancel()
        res = await asyncio.gather(*tasks, return_exceptions=True)
        for i, r in enumerate(res):
            if isinstance(r, asyncio.CancelledError):
                assert i % 3 == 0
            else:
                assert isinstance(r, list) and as_i64(r[0]) == 3, (i, r)
        assert sum(isinstance(r, asyncio.CancelledError) for r in res) >= 20
        outs = await asyncio.gather(*(dag.execute_async(i64(i % 4), timeout=30)
                                      for i in range(100)))
        assert [as_i64(o[0]) for o in outs] == [i % 4 for i in range(100)]
        assert adag.aio._watches == {}
        assert readers(loop) == before  # the DAG's fd is watched no more
        return tasks
    kept = run(main())
    assert len(kept) == 100
    stats = dag.stats()
    assert stats.executed == stats.released  # every ref went back


def test_result_nobody_awaits_does_not_spin_the_loop(rt, counter):
    # ref `kept` completes and is neither got nor released: the DAG's fd
    # stays readable while another execution is awaited. The loop must
    # not spin on it (CPU time well below the wall time).
    dag = one_stage(rt, counter(), "sleep_ms", max_inflight=4)

    async def main():
        kept = dag.execute(i64(0))
        await asyncio.sleep(0.2)  # it completes (ready() would count as a get)
        c0, t0 = time.process_time(), time.monotonic()
        outs = await dag.execute_async(i64(600))
        cpu, wall = time.process_time() - c0, time.monotonic() - t0
        assert as_i64(outs[0]) == 600
        assert [as_i64(o) for o in kept.get(timeout=5)] == [0]
        return cpu, wall
    cpu, wall = run(main())
    assert wall >= 0.55
    assert cpu < 0.4 * wall, f"{cpu:.2f} s of CPU in {wall:.2f} s"


@pytest.mark.parametrize("closing", ["dag", "runtime"])
def test_closed_dag_fails_the_waiting_coroutines(rt, counter, closing):
    dag = one_stage(rt, counter(), "sleep_ms")

    async def main():
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, dag.close if closing == "dag" else rt.close)
        t0 = time.monotonic()
        with pytest.raises(adag.ClosedError):
            await dag.execute_async(i64(300))
        return time.monotonic() - t0
    assert run(main()) < 4  # the close itself waits for the sleeping method
    assert adag.aio._watches == {}


def test_a_ref_awaited_twice_at_once_is_refused(rt, counter):
    dag = one_stage(rt, counter(), "sleep_ms")

    async def main():
        ref = dag.execute(i64(200))
        first = asyncio.ensure_future(ref.wait_async())
        await asyncio.sleep(0.01)
        with pytest.raises(ValueError, match="awaited already"):
            await ref
        assert [as_i64(o) for o in await first] == [200]
    run(main())


def test_fileno_and_non_blocking_probes(rt, counter):
    dag = one_stage(rt, counter(5), "sleep_ms")
    fd = dag.fileno()
    assert isinstance(fd, int) and fd >= 0 and dag.fileno() == fd
    ref = dag.execute(i64(300))
    assert ref.try_get() is None and not ref.ready()
    assert ref.dag is dag
    deadline = time.monotonic() + 10
    while not ref.ready():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert ref.ready()  # still live
    assert [as_i64(o) for o in ref.try_get()] == [300]
    with pytest.raises(ValueError):
        ref.try_get()


def test_killed_worker_fails_the_waiting_coroutines(rt, counter):
    a = counter(name="victim")
    dag = one_stage(rt, a, "sleep_ms", max_inflight=4)

    async def main():
        loop = asyncio.get_running_loop()
        loop.call_later(0.1, os.kill, a.pid, signal.SIGKILL)
        res = await asyncio.gather(*(dag.execute_async(i64(2000)) for _ in range(6)),
                                   return_exceptions=True)
        assert all(isinstance(r, adag.ActorDiedError) for r in res), res
        assert "victim" in str(res[0])
    run(main(), timeout=30)
    assert adag.aio._watches == {}


def test_execute_async_raises_when_the_window_never_moves(rt, counter):
    # both slots held by refs nobody releases: as a blocking execute would,
    # execute_async gives up after the DAG's execute timeout, naming the ref
    dag = one_stage(rt, counter(5), "add", max_inflight=2, execute_timeout=0.5)
    held = [dag.execute(i64(x)) for x in range(2)]

    async def main():
        t0 = time.monotonic()
        with pytest.raises(adag.TimeoutError, match=r"no room after 0.5 s: .*ref 0 is not released"):
            await dag.execute_async(i64(9))
        took = time.monotonic() - t0
        held[0].release()
        assert as_i64((await dag.execute_async(i64(9)))[0]) == 14
        return took
    took = run(main(), timeout=10)
    assert 0.45 < took < 3
    assert adag.aio._watches == {}
