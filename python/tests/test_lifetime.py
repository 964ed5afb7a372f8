"""Lifetimes: nothing leaks over many round trips (memory, references to
the inputs, fds), and a Result or Ref dropped without a release gives its
slots back."""
import asyncio
import gc
import os
import sys

import numpy as np
import pytest

import adag
from conftest import as_i64, i64, one_stage

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def round_trips(dag, how, n):
    x = i64(7)
    if how == "get":
        for _ in range(n):
            dag.execute(x).get()
    elif how == "result":
        for _ in range(n):
            with dag.get(dag.execute(x)) as (out,):
                memoryview(out)[0]  # the slot read in place
    else:
        async def loop():
            for _ in range(n):
                await dag.execute_async(x)
        asyncio.run(loop())


@pytest.mark.parametrize("how", ["get", "result", "async"])
def test_rss_flat_over_many_round_trips(rt, counter, how):
    # an 8-byte round trip leaking even one small object (a list, a bytes)
    # grows the heap by more than 8 MiB over 100k of them; one leaking a
    # Result (its slots with it) ends in a TimeoutError
    n = 100_000
    dag = one_stage(rt, counter(5), "add", max_inflight=4, execute_timeout=5)
    round_trips(dag, how, n // 10)  # warm-up: caches, arenas, the first slots touched
    gc.collect()
    before = rss()
    round_trips(dag, how, n)
    gc.collect()
    grown = rss() - before
    assert grown < 8 << 20, f"RSS grew {grown / 2**20:.1f} MiB over {n} round trips ({how})"
    assert as_i64(dag.execute(i64(1)).get(timeout=10)[0]) == 6


def test_inputs_refcounts_unchanged(rt, counter):
    dag = one_stage(rt, counter(), "echo", max_inflight=4)
    inputs = [b"12345678", bytearray(b"abcdefgh"), memoryview(b"view" * 2),
              np.arange(8, dtype=np.uint8)]
    before = [sys.getrefcount(o) for o in inputs]
    for _ in range(100):
        for o in inputs:
            dag.execute(o).get(timeout=10)
            with dag.get(dag.execute(o), timeout=10):
                pass

    async def many():
        for o in inputs:
            await asyncio.gather(*(dag.execute_async(o) for _ in range(20)))
    asyncio.run(many())
    del o
    assert [sys.getrefcount(o) for o in inputs] == before
    inputs[1].extend(b"!")  # no buffer export left: a bytearray resizes
    assert dag.execute(inputs[1]).get(timeout=10) == [b"abcdefgh!"]


def test_dropped_results_and_refs_give_their_slots_back(rt, counter):
    # max_inflight 2: were a dropped Result or Ref to keep its slots, the
    # third execute would find no room and raise after the 2 s execute
    # timeout
    dag = one_stage(rt, counter(5), "add", max_inflight=2, execute_timeout=2)
    for x in range(20):
        dag.get(dag.execute(i64(x)), timeout=10)           # a Result, dropped unreleased
    for x in range(20):
        dag.execute(i64(x))                               # a Ref, dropped without a get
    assert as_i64(dag.execute(i64(1)).get(timeout=10)[0]) == 6
    s = dag.stats()
    assert s.released == s.executed == 41


def test_asyncio_leaves_no_fd_and_no_watch(rt, counter):
    dag = one_stage(rt, counter(5), "add", max_inflight=4)

    def fds():
        return len(os.listdir("/proc/self/fd"))
    dag.fileno()  # the DAG's own fd, kept while the DAG lives
    before = fds()

    async def main():
        for x in range(200):
            assert as_i64((await dag.execute_async(i64(x)))[0]) == x + 5
        await asyncio.gather(*(dag.execute_async(i64(x)) for x in range(200)))
    asyncio.run(main())
    assert fds() == before
    assert adag.aio._watches == {}
