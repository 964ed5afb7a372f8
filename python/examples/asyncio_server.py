#!/usr/bin/env python3
"""An asyncio server whose requests run through a DAG: a TCP line server on
loopback; each request (a list of numbers) goes through 2 Python actors
(normalize, then score) with `await dag.execute_async(...)`, many requests
in flight at once, the event loop never blocked. The example starts its
own clients, checks every answer and prints the request rate.

    PYTHONPATH=build/python python3 python/examples/asyncio_server.py [--clients N] [--requests M]
"""
import argparse
import asyncio
import time

import numpy as np

import adag


class Normalize:
    def run(self, x):
        return (x - x.mean()) / (x.std() + 1e-9)


class Score:
    def __init__(self, seed):
        self.w = np.random.default_rng(seed).standard_normal(16)

    def run(self, x):
        return np.array([float(x @ self.w[: len(x)])])


def expected(values, seed=5):
    x = np.array(values, dtype=np.float64)
    x = (x - x.mean()) / (x.std() + 1e-9)
    return float(x @ np.random.default_rng(seed).standard_normal(16)[: len(x)])


async def serve(dag):
    async def handle(reader, writer):
        while line := await reader.readline():
            x = np.array([float(v) for v in line.split()], dtype=np.float64)
            (out,) = await dag.execute_async(x)  # other requests run meanwhile
            writer.write(b"%r\n" % float(np.frombuffer(out, np.float64)[0]))
            await writer.drain()
        writer.close()
    return await asyncio.start_server(handle, "127.0.0.1", 0)


async def client(port, n, rng):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    worst = 0.0
    for _ in range(n):
        values = rng.integers(0, 100, size=16).tolist()
        writer.write((" ".join(map(str, values)) + "\n").encode())
        await writer.drain()
        got = float(await reader.readline())
        worst = max(worst, abs(got - expected(values)))
    writer.close()
    return worst


async def main(a):
    with adag.Runtime() as rt:
        norm, score = rt.actor(Normalize), rt.actor(Score, args=(5,))
        g = rt.graph()
        g.output(g.bind(score, "run", g.bind(norm, "run", g.input(0))))
        dag = g.compile(max_inflight=8)
        server = await serve(dag)
        port = server.sockets[0].getsockname()[1]
        t0 = time.perf_counter()
        worst = await asyncio.gather(*(client(port, a.requests, np.random.default_rng(i))
                                       for i in range(a.clients)))
        dt = time.perf_counter() - t0
        server.close()
        await server.wait_closed()
    n = a.clients * a.requests
    ok = max(worst) < 1e-9
    print(f"{n} requests from {a.clients} clients through 2 actors: {n / dt:.0f} requests/s, "
          f"{'every answer right' if ok else 'WRONG ANSWERS'}")
    return 0 if ok else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--requests", type=int, default=50)
    raise SystemExit(asyncio.run(main(p.parse_args())))
