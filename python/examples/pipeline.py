#!/usr/bin/env python3
"""A 3-stage numpy pipeline of Python actors, each in its own adag-worker
process: normalize -> project -> softmax, 8 batches in flight.

    PYTHONPATH=build/python python3 python/examples/pipeline.py [--batches N] [--threads]

Every result is checked against the same math done here in one process.
"""
import argparse
import time

import numpy as np

import adag


class Normalize:
    """Each row to zero mean and unit variance."""

    def run(self, x):
        mean = x.mean(axis=1, keepdims=True)
        std = x.std(axis=1, keepdims=True) + 1e-6
        return ((x - mean) / std).astype(np.float32)


class Project:
    """x @ W: a fixed random projection, made from a seed in the actor."""

    def __init__(self, d_in, d_out, seed):
        self.w = np.random.default_rng(seed).standard_normal((d_in, d_out)).astype(np.float32)

    def run(self, x):
        return x @ self.w


class Softmax:
    """Writes its output in place, in the slot (adag.current_call().output)."""

    def run(self, x):
        out = adag.current_call().output(0, x.shape, x.dtype)
        np.subtract(x, x.max(axis=1, keepdims=True), out=out)
        np.exp(out, out=out)
        out /= out.sum(axis=1, keepdims=True)
        return None


def reference(x, d_in, d_out, seed):
    """The same math in this process."""
    y = Project(d_in, d_out, seed).run(Normalize().run(x))
    e = np.exp(y - y.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--d-in", type=int, default=256)
    p.add_argument("--d-out", type=int, default=64)
    p.add_argument("--threads", action="store_true", help="thread actors instead of processes")
    a = p.parse_args()
    placement = "thread" if a.threads else "process"
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((a.rows, a.d_in)).astype(np.float32) for _ in range(8)]

    with adag.Runtime() as rt:
        norm = rt.actor(Normalize, placement=placement)
        proj = rt.actor(Project, args=(a.d_in, a.d_out, 7), placement=placement)
        soft = rt.actor(Softmax, placement=placement)
        g = rt.graph()
        g.output(g.bind(soft, "run", g.bind(proj, "run", g.bind(norm, "run", g.input(0)))))
        dag = g.compile(max_inflight=8, slot_capacity=a.rows * a.d_in * 4)

        want = [reference(x, a.d_in, a.d_out, 7) for x in inputs]
        t0 = time.perf_counter()
        refs, done = [], 0
        for i in range(a.batches):
            refs.append((i, dag.execute(inputs[i % 8])))
            if len(refs) == 8 or i == a.batches - 1:  # 8 in flight, then collect them
                for j, ref in refs:
                    with dag.get(ref, timeout=60) as (out,):
                        # out.numpy() views the slot: compared here, kept by nobody
                        # (a view kept past the block would keep the slot too)
                        if not np.allclose(out.numpy(), want[j % 8], rtol=1e-4, atol=1e-6):
                            raise SystemExit(f"batch {j}: wrong result")
                    done += 1
                refs = []
        dt = time.perf_counter() - t0
    print(f"{done} batches of {a.rows}x{a.d_in} through 3 {placement} actors: "
          f"{done / dt:.0f} batches/s, every result equal to numpy's")


if __name__ == "__main__":
    main()
