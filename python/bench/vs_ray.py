#!/usr/bin/env python3
"""The same Python actors driven by adag and by Ray Compiled Graphs, in one run.

    python/bench/vs_ray.py [--quick] [--rounds R] [--iters N] [--json] [--only ROW]
    make bench-python                      # builds the package for a python3 with Ray

Rows (each actor is a process; the classes are below, one definition for both):
  roundtrip        driver -> echo(8 B of bytes) -> driver, one in flight
  chain            4 actors in a pipeline, each echoes its input (8 B); 1 and 8 in flight
  scatter-gather   one input (8 B) to 4 actors, 4 outputs
  payload          a numpy array of 1 MiB / 16 MiB to one actor, which returns its length
  c-roundtrip      the round trip of 8 B to a C actor: driven from Python (this package)
                   and from C (adag-bench's roundtrip row, run as a subprocess)

Rounds alternate adag and Ray (the machine is shared and noisy), each system alone on the
machine while it runs (started, measured on every row, shut down): each figure is the median
over rounds of each round's median latency (in flight 1) or executions per second (in
flight 8). Ray's figure over adag's is the ratio (> 1: adag is faster).

Exit status 0; a peer that is missing (Ray, adag-bench) leaves its figures "skipped: <why>".
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

import adag

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MIB = 1 << 20
GET_TIMEOUT = 120.0


class Worker:
    """The actor class both systems run (a plain class: Ray wraps it with
    ray.remote, adag runs it as it is)."""

    def echo(self, x):
        return x

    def length(self, x):
        return np.array([len(x)], dtype=np.int64)


def log(msg):
    print(f"vs_ray: {msg}", file=sys.stderr, flush=True)


# ---- measuring: the same loops for both systems ----

WARMUP_S = 0.5  # at least this long untimed first: wait policies and caches settle


def warm(run, warmup):
    t_end = time.perf_counter() + WARMUP_S
    n = 0
    while n < warmup or time.perf_counter() < t_end:
        run()
        n += 1


def lat_loop(run_one, iters, warmup):
    """Median microseconds of run_one() (one execution, in flight 1), after
    warmup executions and at least WARMUP_S seconds of them."""
    warm(run_one, warmup)
    times = []
    clock = time.perf_counter
    for _ in range(iters):
        t = clock()
        run_one()
        times.append(clock() - t)
    return statistics.median(times) * 1e6


def rate_loop(submit, wait, k, iters, warmup):
    """Executions per second with k in flight: submit k ahead, wait the oldest."""
    def go(n):
        pending = [submit() for _ in range(k)]
        for _ in range(n):
            wait(pending.pop(0))
            pending.append(submit())
        for p in pending:
            wait(p)
    warm(lambda: go(1), warmup)
    t = time.perf_counter()
    go(iters)
    return (iters + k) / (time.perf_counter() - t)


# ---- the graphs, per system ----

class AdagSide:
    name = "adag"

    def __init__(self, n):
        self.rt = adag.Runtime()
        self.actors = [self.rt.actor(Worker, name=f"w{i}") for i in range(n)]

    def compile(self, row, k, size):
        g = self.rt.graph()
        x = g.input(0)
        if row in ("roundtrip", "payload"):
            g.output(g.bind(self.actors[0], "length" if row == "payload" else "echo", x))
        elif row == "chain":
            for a in self.actors:
                x = g.bind(a, "echo", x)
            g.output(x)
        else:
            g.output(*[g.bind(a, "echo", x) for a in self.actors])
        return g.compile(max_inflight=max(k, 1), slot_capacity=max(size, 4096) + 4096)

    @staticmethod
    def submit(dag, value):
        return dag.execute(value)

    @staticmethod
    def wait(ref):
        return ref.get(timeout=GET_TIMEOUT)

    @staticmethod
    def close(dag):
        dag.close()

    def shutdown(self):
        self.rt.close()


class RaySide:
    name = "ray"

    def __init__(self, n):
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        os.environ.setdefault("RAY_DEDUP_LOGS", "0")
        # a read past 10 s (Ray's default) is a starved 2-core machine, not a hang
        os.environ.setdefault("RAY_CGRAPH_get_timeout", str(int(GET_TIMEOUT)))
        import ray
        from ray.dag import InputNode, MultiOutputNode
        self.ray, self.InputNode, self.MultiOutputNode = ray, InputNode, MultiOutputNode
        # Ray's channels leave named semaphores in /dev/shm; the peer of
        # adag-bench (bench/peers/ray_cgraph.py) knows which and removes them
        sys.path.insert(0, os.path.join(REPO, "bench", "peers"))
        import ray_cgraph
        self.peer = ray_cgraph
        self.sems_before = ray_cgraph.ray_sems()
        ray.init(num_cpus=max(4, n + 1), include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        remote = ray.remote(num_cpus=0)(Worker)
        self.actors = [remote.remote() for _ in range(n)]
        ray.get([a.echo.remote(0) for a in self.actors])

    def compile(self, row, k, size):
        with self.InputNode() as inp:
            if row in ("roundtrip", "payload"):
                a = self.actors[0]
                dag = (a.length if row == "payload" else a.echo).bind(inp)
            elif row == "chain":
                dag = inp
                for a in self.actors:
                    dag = a.echo.bind(dag)
            else:
                dag = self.MultiOutputNode([a.echo.bind(inp) for a in self.actors])
        return dag.experimental_compile(_max_inflight_executions=max(k, 1),
                                        _buffer_size_bytes=max(size, 4096) + MIB)

    @staticmethod
    def submit(dag, value):
        return dag.execute(value)

    def wait(self, ref):
        return self.ray.get(ref, timeout=GET_TIMEOUT)

    @staticmethod
    def close(dag):
        dag.teardown()

    def shutdown(self):
        self.ray.shutdown()
        self.peer.remove_leaked_sems(self.sems_before)


# rows: (name, in flight, bytes, metric)
ROWS = [("roundtrip", 1, 8, "us"), ("chain", 1, 8, "us"), ("chain", 8, 8, "per_s"),
        ("scatter-gather", 1, 8, "us"), ("payload", 1, MIB, "us"), ("payload", 1, 16 * MIB, "us")]


def measure(side, row, k, size, metric, iters, warmup):
    # 8 B rows send bytes; payloads a numpy array (which Ray hands its actor
    # as a view of its channel: echoing that view back would hold the
    # channel, so payload actors return only the length)
    raw = np.random.default_rng(size).bytes(size)
    value = raw if row != "payload" else np.frombuffer(raw, dtype=np.uint8).copy()
    n = iters if size <= MIB else max(20, iters // 20)
    dag = side.compile(row, k, size)
    try:
        check(side.name, row, side.wait(side.submit(dag, value)), value)
        # (a result Ray returns may view its channel: none is kept past here)
        if metric == "us":
            return lat_loop(lambda: side.wait(side.submit(dag, value)), n, warmup)
        return rate_loop(lambda: side.submit(dag, value), side.wait, k, n, warmup)
    finally:
        side.close(dag)


def check(name, row, got, value):
    """Every system's results are checked once per graph."""
    outs = got if isinstance(got, list) else [got]
    for o in outs:
        arr = np.frombuffer(o, dtype=np.uint8) if isinstance(o, bytes) else np.asarray(o)
        if row == "payload":
            ok = int(arr.view(np.int64)[0] if arr.dtype == np.uint8 else arr[0]) == len(value)
        else:
            ok = bytes(o) == value
        if not ok:
            raise SystemExit(f"vs_ray: {name} {row}: wrong result {o!r:.80}")


def memcpy_us(size, iters):
    """The floor of a payload row: one copy of `size` bytes in this process
    (numpy.copyto into a buffer written before), median microseconds."""
    src = np.frombuffer(np.random.default_rng(size).bytes(size), dtype=np.uint8)
    dst = np.empty_like(src)
    dst[:] = 1
    return lat_loop(lambda: np.copyto(dst, src), iters, iters // 10)


def c_roundtrip(rounds, iters):
    """The round trip of 8 B to a C process actor (the bench module's "pass"), driven by the
    C API (adag-bench --only roundtrip) and by this package, in alternating rounds, with
    the default spin and with spin 0 (futex waits)."""
    bench = os.path.join(REPO, "build", "adag-bench")
    module = os.path.join(REPO, "build", "bench", "libbench_actors.so")
    if not (os.access(bench, os.X_OK) and os.path.exists(module)):
        return {"skipped": f"no {bench} (run make)"}
    got = {(who, spin): [] for who in ("c", "python") for spin in (-1, 0)}
    for _ in range(rounds):
        out = subprocess.run([bench, "--only", "roundtrip", "--json"], capture_output=True,
                             text=True, timeout=600)
        for r in json.loads(out.stdout):
            spin = r.get("params", {}).get("spin_ns")
            if r.get("placement") == "process" and spin in (-1, 0) and r.get("median_us"):
                got[("c", spin)].append(r["median_us"])
        for spin in (-1, 0):
            settings = {} if spin < 0 else {"spin_ns": 0}
            with adag.Runtime(**settings) as rt:
                a = rt.actor("bench", module=module)
                g = rt.graph()
                g.output(g.bind(a, "pass", g.input(0)))
                dag = g.compile()
                x = b"12345678"
                got[("python", spin)].append(
                    lat_loop(lambda: dag.execute(x).get(timeout=GET_TIMEOUT), iters, iters // 10))
    if not got[("c", -1)]:
        return {"skipped": "adag-bench printed no process roundtrip row"}
    return {f"{who}_us" + ("" if spin < 0 else "_spin0"): statistics.median(v)
            for (who, spin), v in got.items() if v}


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="2 rounds, fewer iterations")
    p.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 5)")
    p.add_argument("--iters", type=int, default=None, help="executions per row (default 2000)")
    p.add_argument("--only", default=None, help="run only this row (or c-roundtrip)")
    p.add_argument("--json", action="store_true", help="a JSON object per row on stdout")
    a = p.parse_args(argv)
    rounds = a.rounds or (2 if a.quick else 5)
    iters = a.iters or (300 if a.quick else 2000)
    warmup = max(10, iters // 10)
    rows = [r for r in ROWS if a.only in (None, r[0])]

    # each system runs alone: started, measured on every row, shut down, then
    # the other (what one leaves running, a spinning loop or Ray's raylet and
    # its polling threads, would slow the other on a 2-core machine); who
    # goes first alternates by round
    makers = [AdagSide]
    ray_skip = None
    try:
        import ray  # noqa: F401
        makers.append(RaySide)
    except ImportError as e:
        ray_skip = f"Ray is not installed ({e}): pip install 'ray[default]'"
        log(f"skipped: {ray_skip}")

    figures = {(r, m.name): [] for r in rows for m in makers}
    copies = {r: [] for r in rows if r[0] == "payload"}
    for rnd in range(rounds):
        for row in copies:
            copies[row].append(memcpy_us(row[2], max(20, iters // 20)))
        for maker in (makers if rnd % 2 == 0 else makers[::-1]):
            side = maker(4)
            try:
                for row in rows:
                    figures[(row, side.name)].append(
                        measure(side, row[0], row[1], row[2], row[3], iters, warmup))
            finally:
                side.shutdown()
        log(f"round {rnd + 1}/{rounds} done")

    results = []
    for row in rows:
        name, k, size, metric = row
        res = {"name": name, "inflight": k, "bytes": size, "metric": metric}
        for s in ("adag", "ray"):
            vals = figures.get((row, s))
            res[s] = statistics.median(vals) if vals else None
            res[s + "_rounds"] = vals
        if row in copies:
            res["memcpy_us"] = statistics.median(copies[row])
        if res["ray"] and res["adag"]:
            res["ray_over_adag"] = (res["ray"] / res["adag"] if metric == "us"
                                    else res["adag"] / res["ray"])
        elif ray_skip:
            res["ray"] = f"skipped: {ray_skip}"
        results.append(res)
    if a.only in (None, "c-roundtrip"):
        results.append({"name": "c-roundtrip", **c_roundtrip(rounds, max(iters, 2000))})

    if a.json:
        for r in results:
            print(json.dumps(r))
        return 0
    print(f"{'row':<16}{'in flight':>10}{'bytes':>10}{'adag':>14}{'Ray CG':>14}{'Ray/adag':>10}"
          f"   rounds: adag, Ray (min-max)")
    for r in results:
        if r["name"] == "c-roundtrip":
            if "skipped" in r:
                print(f"{'c-roundtrip':<16} skipped: {r['skipped']}")
            else:
                for sfx, what in (("", "spin"), ("_spin0", "spin 0")):
                    if "c_us" + sfx in r and "python_us" + sfx in r:
                        py, c = r["python_us" + sfx], r["c_us" + sfx]
                        print(f"{'c-roundtrip':<16}{'':>10}{8:>10}  ({what}) Python driver "
                              f"{py:.2f} us, C driver {c:.2f} us: {py - c:+.2f} us")
            continue
        unit = " us" if r["metric"] == "us" else "/s"
        fmt = (lambda v: f"{v:.1f}{unit}" if isinstance(v, float) else "skipped")
        ratio = f"{r['ray_over_adag']:.1f}x" if "ray_over_adag" in r else "-"
        span = "  ".join(f"{min(v):.1f}-{max(v):.1f}" for v in (r["adag_rounds"], r["ray_rounds"])
                         if v)
        extra = f"   one memcpy {r['memcpy_us']:.1f} us" if "memcpy_us" in r else ""
        print(f"{r['name']:<16}{r['inflight']:>10}{r['bytes']:>10}{fmt(r['adag']):>14}"
              f"{fmt(r['ray']):>14}{ratio:>10}   {span}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
