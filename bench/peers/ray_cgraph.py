#!/usr/bin/env python3
"""Ray Compiled Graphs peer for adag-bench (--vs-ray).

Runs the adag-bench microbenchmark scenarios with Ray Compiled Graphs so the C
harness can print adag-vs-Ray ratios side by side:

  roundtrip       1 actor, driver -> echo(8 B) -> driver, in-flight 1
  chain           4 actors in a pipeline (each echoes its input), in-flight 1 and 8
  scatter-gather  one input to 4 actors, 4 outputs (MultiOutputNode), in-flight 1
  payload         1 actor receives S bytes and returns len(); S = 8 B .. 64 MiB

Output: with --json, a JSON array on stdout (nothing else goes to stdout; Ray's
and our logs go to stderr) of
  {"name", "placement": "ray", "params": {"n", "inflight", "bytes"},
   "median_us", "p99_us", "per_s", "gbps" (payload only, else null), "iterations"}
Without --json, an aligned table.

Latency is measured per execution from compiled.execute(x) to the return of
ray.get(ref) (for in-flight K: execute K ahead, get the oldest). per_s is
executions completed / wall time of the timed loop. gbps = bytes / median
latency / 1e9.

Exit status: 0 on success, 3 when Ray is not installed (the harness skips the
peer), 2 on bad arguments, 1 on any other failure.
"""

import argparse
import json
import os
import random
import re
import sys
import time

EXIT_NO_RAY = 3

KIB = 1024
MIB = 1024 * 1024
PAYLOAD_SIZES_FULL = [8, 1 * KIB, 64 * KIB, 1 * MIB, 16 * MIB, 64 * MIB]
PAYLOAD_SIZES_QUICK = [8, 1 * KIB, 64 * KIB, 1 * MIB, 16 * MIB]
SCENARIOS = ["roundtrip", "chain", "scatter-gather", "payload"]
CHAIN_N = 4
CHAIN_INFLIGHT_K = 8
SCATTER_N = 4
# Serialization and channel header overhead on top of the payload itself.
BUFFER_OVERHEAD = 1 * MIB
# Per-get timeout: nothing in these scenarios should take anywhere near this;
# reaching it means Ray is hung and we fail instead of blocking the harness.
GET_TIMEOUT_S = 120.0


def log(msg):
    print(f"ray_cgraph: {msg}", file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Ray Compiled Graphs peer for adag-bench --vs-ray")
    p.add_argument("--json", action="store_true",
                   help="print a JSON array of results on stdout")
    p.add_argument("--quick", action="store_true",
                   help="few iterations, payloads up to 16 MiB (whole run < ~60 s)")
    p.add_argument("--iters", type=int, default=None,
                   help="timed iterations per small-message scenario "
                        "(default 2000, 300 with --quick); large payloads use fewer")
    p.add_argument("--seed", type=int, default=1,
                   help="random seed for payload bytes (default 1)")
    p.add_argument("--scenario", choices=SCENARIOS, default=None,
                   help="run only this scenario")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed executions per compiled graph (default 100, 50 with --quick)")
    a = p.parse_args(argv)
    if a.iters is None:
        a.iters = 300 if a.quick else 2000
    if a.warmup is None:
        a.warmup = 50 if a.quick else 100
    if a.iters < 1:
        p.error("--iters must be >= 1")
    if a.warmup < 0:
        p.error("--warmup must be >= 0")
    return a


# Named POSIX semaphores of Ray's shared-memory channels (/dev/shm/sem.hdr<pid>-N,
# sem.obj<pid>-N, created by the raylet). Ray 2.60 leaves some behind after
# teardown + shutdown (seen with pipelined graphs); we remove the ones this run
# created once their creator has exited.
RAY_SEM_RE = re.compile(r"^sem\.(?:hdr|obj)(\d+)-\d+$")
SHM_DIR = "/dev/shm"


def ray_sems():
    try:
        return {n for n in os.listdir(SHM_DIR) if RAY_SEM_RE.match(n)}
    except OSError:
        return set()


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leaked_sems(before):
    new = ray_sems() - before
    if not new:
        return
    pids = {int(RAY_SEM_RE.match(n).group(1)) for n in new}
    deadline = time.monotonic() + 3.0
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    removed = 0
    for n in new:
        if not pid_alive(int(RAY_SEM_RE.match(n).group(1))):
            try:
                os.unlink(os.path.join(SHM_DIR, n))
                removed += 1
            except OSError:
                pass
    if removed:
        log(f"removed {removed} semaphores Ray left in {SHM_DIR}")


def percentile(sorted_vals, q):
    """Nearest-rank percentile of an ascending list (q in 0..100)."""
    if not sorted_vals:
        return float("nan")
    k = max(0, min(len(sorted_vals) - 1, int(-(-q * len(sorted_vals) // 100)) - 1))
    return sorted_vals[k]


def median(sorted_vals):
    n = len(sorted_vals)
    if n == 0:
        return float("nan")
    if n % 2:
        return float(sorted_vals[n // 2])
    return (sorted_vals[n // 2 - 1] + sorted_vals[n // 2]) / 2.0


def payload_iters(size, iters, quick):
    """Fewer iterations for large payloads: a byte budget per size."""
    budget = (1 if quick else 4) * 1024 * MIB
    floor = 20 if quick else 40
    return max(1, min(iters, max(floor, budget // size)))


def main(argv):
    args = parse_args(argv)

    # Keep stdout clean for the JSON: everything written to fd 1 from here on
    # (Python, Ray's C++ core, child processes that inherit it) goes to stderr;
    # results are written to a private duplicate of the original stdout.
    sys.stdout.flush()
    result_fd = os.dup(1)
    os.dup2(2, 1)
    result_out = os.fdopen(result_fd, "w")

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network here
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    try:
        import ray
        from ray.dag import InputNode, MultiOutputNode
    except ImportError as e:
        print("Ray is not installed: pip install ray", file=sys.stderr)
        log(f"(import error: {e})")
        return EXIT_NO_RAY

    rng = random.Random(args.seed)
    results = []
    compiled_graphs = []  # every compiled graph not yet torn down

    @ray.remote(num_cpus=0)
    class Worker:
        def echo(self, x):
            return x

        def length(self, x):
            return len(x)

        def ready(self):
            return os.getpid()

    def compile_dag(dag, inflight, buffer_bytes=None):
        kw = {"_max_inflight_executions": inflight}
        if buffer_bytes is not None:
            kw["_buffer_size_bytes"] = int(buffer_bytes)
        compiled = dag.experimental_compile(**kw)
        compiled_graphs.append(compiled)
        return compiled

    def teardown(compiled):
        compiled_graphs.remove(compiled)
        compiled.teardown()

    def get(ref):
        return ray.get(ref, timeout=GET_TIMEOUT_S)

    def run_inflight1(compiled, x, iters, warmup, check):
        for _ in range(warmup):
            check(get(compiled.execute(x)))
        lat = [0] * iters
        clock = time.perf_counter_ns
        t_start = clock()
        for i in range(iters):
            t0 = clock()
            out = get(compiled.execute(x))
            lat[i] = clock() - t0
            if i == 0:
                check(out)
        elapsed = clock() - t_start
        return lat, elapsed

    def run_pipelined(compiled, x, iters, warmup, k, check):
        for _ in range(warmup):
            check(get(compiled.execute(x)))
        clock = time.perf_counter_ns
        lat = [0] * iters
        pending = []  # (index, t_submit, ref), oldest first
        submitted = 0
        done = 0
        t_start = clock()
        while done < iters:
            while submitted < iters and len(pending) < k:
                t0 = clock()
                pending.append((submitted, t0, compiled.execute(x)))
                submitted += 1
            idx, t0, ref = pending.pop(0)
            out = get(ref)
            lat[idx] = clock() - t0
            if idx == 0:
                check(out)
            done += 1
        elapsed = clock() - t_start
        return lat, elapsed

    def record(name, params, lat_ns, elapsed_ns, nbytes_for_gbps=None):
        s = sorted(lat_ns)
        med_us = median(s) / 1e3
        p99_us = percentile(s, 99) / 1e3
        per_s = len(s) / (elapsed_ns / 1e9) if elapsed_ns > 0 else float("nan")
        gbps = None
        if nbytes_for_gbps is not None and med_us > 0:
            gbps = nbytes_for_gbps / (med_us / 1e6) / 1e9
        r = {"name": name, "placement": "ray", "params": params,
             "median_us": round(med_us, 3), "p99_us": round(p99_us, 3),
             "per_s": round(per_s, 1),
             "gbps": None if gbps is None else float(f"{gbps:.6g}"),
             "iterations": len(s)}
        results.append(r)
        log(f"{name} {params}: median {r['median_us']} us, p99 {r['p99_us']} us, "
            f"{r['per_s']}/s" + ("" if gbps is None else f", {r['gbps']} GB/s"))

    def expect_equal(want):
        def check(got):
            if got != want:
                raise RuntimeError(f"wrong result: got {got!r:.60}, want {want!r:.60}")
        return check

    sems_before = ray_sems()
    t_init = time.monotonic()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR",
             log_to_driver=False, configure_logging=True)
    log(f"Ray {ray.__version__} started in {time.monotonic() - t_init:.1f} s")

    status = 0
    try:
        wanted = [args.scenario] if args.scenario else SCENARIOS
        n_actors = max(CHAIN_N if "chain" in wanted else 1,
                       SCATTER_N if "scatter-gather" in wanted else 1)
        t0 = time.monotonic()
        actors = [Worker.remote() for _ in range(n_actors)]
        ray.get([a.ready.remote() for a in actors], timeout=GET_TIMEOUT_S)
        log(f"{n_actors} actors ready in {time.monotonic() - t0:.1f} s")

        small = rng.randbytes(8)

        if "roundtrip" in wanted:
            with InputNode() as inp:
                dag = actors[0].echo.bind(inp)
            c = compile_dag(dag, 1)
            lat, el = run_inflight1(c, small, args.iters, args.warmup,
                                    expect_equal(small))
            teardown(c)
            record("roundtrip", {"n": 1, "inflight": 1, "bytes": 8}, lat, el)

        if "chain" in wanted:
            for k in (1, CHAIN_INFLIGHT_K):
                with InputNode() as inp:
                    node = inp
                    for a in actors[:CHAIN_N]:
                        node = a.echo.bind(node)
                    dag = node
                c = compile_dag(dag, k)
                if k == 1:
                    lat, el = run_inflight1(c, small, args.iters, args.warmup,
                                            expect_equal(small))
                else:
                    lat, el = run_pipelined(c, small, args.iters, args.warmup, k,
                                            expect_equal(small))
                teardown(c)
                record("chain", {"n": CHAIN_N, "inflight": k, "bytes": 8}, lat, el)

        if "scatter-gather" in wanted:
            with InputNode() as inp:
                dag = MultiOutputNode([a.echo.bind(inp) for a in actors[:SCATTER_N]])
            c = compile_dag(dag, 1)
            lat, el = run_inflight1(c, small, args.iters, args.warmup,
                                    expect_equal([small] * SCATTER_N))
            teardown(c)
            record("scatter-gather", {"n": SCATTER_N, "inflight": 1, "bytes": 8},
                   lat, el)

        if "payload" in wanted:
            sizes = PAYLOAD_SIZES_QUICK if args.quick else PAYLOAD_SIZES_FULL
            data_all = rng.randbytes(max(sizes))
            for size in sizes:
                data = data_all[:size]
                iters = payload_iters(size, args.iters, args.quick)
                warmup = min(args.warmup, max(3, iters // 5))
                with InputNode() as inp:
                    dag = actors[0].length.bind(inp)
                # The channel must hold the whole payload plus overhead.
                buf = max(size + BUFFER_OVERHEAD, 1_000_000)
                c = compile_dag(dag, 1, buffer_bytes=buf)
                lat, el = run_inflight1(c, data, iters, warmup, expect_equal(size))
                teardown(c)
                record("payload", {"n": 1, "inflight": 1, "bytes": size}, lat, el,
                       nbytes_for_gbps=size)
    except Exception as e:  # report, clean up, fail
        log(f"error: {type(e).__name__}: {e}")
        status = 1
    finally:
        for c in list(compiled_graphs):
            try:
                teardown(c)
            except Exception as e:
                log(f"teardown failed: {e}")
        try:
            ray.shutdown()
        except Exception as e:
            log(f"ray.shutdown failed: {e}")
            status = status or 1
        remove_leaked_sems(sems_before)

    if status == 0:
        if args.json:
            # One result object per line: easy to read and to parse line-wise.
            result_out.write("[\n" + ",\n".join(json.dumps(r) for r in results)
                             + "\n]\n")
        else:
            result_out.write(format_table(results, ray.__version__))
        result_out.flush()
    log(f"total {time.monotonic() - t_init:.1f} s")
    return status


def format_table(results, version):
    def human_bytes(b):
        if b >= MIB and b % MIB == 0:
            return f"{b // MIB} MiB"
        if b >= KIB and b % KIB == 0:
            return f"{b // KIB} KiB"
        return f"{b} B"

    head = ["scenario", "n", "inflight", "bytes", "iters",
            "median_us", "p99_us", "per_s", "GB/s"]
    rows = []
    for r in results:
        p = r["params"]
        rows.append([r["name"], str(p["n"]), str(p["inflight"]),
                     human_bytes(p["bytes"]), str(r["iterations"]),
                     f"{r['median_us']:.1f}", f"{r['p99_us']:.1f}",
                     f"{r['per_s']:.0f}",
                     "-" if r["gbps"] is None else f"{r['gbps']:.3f}"])
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h)
              for i, h in enumerate(head)]

    def fmt(row):
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:])]
        return "  ".join(cells).rstrip()

    lines = [f"Ray Compiled Graphs (ray {version}), placement: ray",
             fmt(head), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in rows]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
