#!/usr/bin/env python3
"""A torch MLP split over 2 process actors (pipeline parallel): layers 0-1 in
one adag-worker, layers 2-3 in the other, 4 batches in flight. On CUDA when
torch sees a GPU, on the CPU otherwise.

    PYTHONPATH=build/python python3 python/examples/torch_mlp.py [--batches N]

Each result is checked against the whole model run in this process.
Without torch it says "skipped: torch is not installed" and exits 0.
"""
import argparse
import sys
import time

import numpy as np

import adag

try:
    import torch
except ImportError:
    torch = None

D_IN, D_HIDDEN, D_OUT = 256, 512, 32


def layers(first, last, seed):
    """Layers first..last of the model, each Linear + GELU but the last;
    the same weights wherever they are made (one seed per layer)."""
    dims = [D_IN, D_HIDDEN, D_HIDDEN, D_HIDDEN, D_OUT]
    mods = []
    for i in range(first, last + 1):
        torch.manual_seed(seed + i)
        mods.append(torch.nn.Linear(dims[i], dims[i + 1]))
        if i < len(dims) - 2:
            mods.append(torch.nn.GELU())
    return torch.nn.Sequential(*mods).eval()


class Stage:
    """Layers first..last on this actor's device."""

    def __init__(self, first, last, seed, device):
        torch.set_num_threads(1)  # one core per stage: the stages run side by side
        self.device = torch.device(device)
        self.net = layers(first, last, seed).to(self.device)

    def forward(self, x):
        # x views the input slot, read-only: torch.tensor copies it (to the GPU
        # on CUDA); the result is returned as a host array, copied into the slot
        with torch.no_grad():
            y = self.net(torch.tensor(x, device=self.device))
        return y.cpu().numpy()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", type=int, default=100)
    p.add_argument("--rows", type=int, default=32)
    a = p.parse_args()
    if torch is None:
        print("skipped: torch is not installed (pip install torch)")
        return 0
    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    rng = np.random.default_rng(3)
    inputs = [rng.standard_normal((a.rows, D_IN)).astype(np.float32) for _ in range(4)]
    with torch.no_grad():
        model = layers(0, 3, seed=11)
        want = [model(torch.from_numpy(x)).numpy() for x in inputs]

    with adag.Runtime() as rt:
        s0 = rt.actor(Stage, args=(0, 1, 11, device), name="layers0-1")
        s1 = rt.actor(Stage, args=(2, 3, 11, device), name="layers2-3")
        g = rt.graph()
        g.output(g.bind(s1, "forward", g.bind(s0, "forward", g.input(0))))
        dag = g.compile(max_inflight=4, slot_capacity=a.rows * D_HIDDEN * 4)
        t0 = time.perf_counter()
        pending, worst = [], 0.0
        for i in range(a.batches):
            pending.append((i, dag.execute(inputs[i % 4])))
            if len(pending) == 4 or i == a.batches - 1:
                for j, ref in pending:
                    with dag.get(ref, timeout=120) as (out,):
                        worst = max(worst, float(np.abs(out.numpy() - want[j % 4]).max()))
                pending = []
        dt = time.perf_counter() - t0
    ok = worst < 1e-4
    print(f"{a.batches} batches of {a.rows}x{D_IN} through 2 stages on {device}: "
          f"{a.batches / dt:.0f} batches/s, largest difference from the whole model {worst:.2e}"
          f"{'' if ok else ' (TOO LARGE)'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
