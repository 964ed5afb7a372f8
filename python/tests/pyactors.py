"""Actor classes written in Python, for python/tests (imported by the
workers too: nothing here imports pytest)."""
import os
import time

import numpy as np

import adag


class Scale:
    """mul(x) = x * k + b for arrays; echo returns its input."""

    def __init__(self, k, b=0):
        self.k = k
        self.b = b
        self.calls = 0

    def mul(self, x):
        self.calls += 1
        return x * self.k + self.b

    def echo(self, x):
        return x

    def count(self):
        return np.array([self.calls], dtype=np.int64)

    def pid(self):
        return np.array([os.getpid()], dtype=np.int64)

    def kind(self, x):
        """What the method got: b"memoryview" for bytes, "ndarray <dtype> <shape>"."""
        if isinstance(x, memoryview):
            return b"memoryview " + bytes(x)
        return f"ndarray {x.dtype} {x.shape} {x.flags.writeable}".encode()

    @adag.method(returns=2)
    def split(self, x):
        h = len(x) // 2
        return x[:h], x[h:]

    def add(self, x, y):
        return x + y

    def fail(self, x):
        raise ValueError(f"bad value {int(np.asarray(x).ravel()[0])}")

    def sleep(self, x):
        """Sleeps x seconds (a float64, as bytes or an array)."""
        secs = np.frombuffer(x, np.float64)[0] if isinstance(x, memoryview) else x.ravel()[0]
        time.sleep(float(secs))
        return x

    def nothing(self, x):
        return None

    def in_place(self, x):
        call = adag.current_call()
        out = call.output(0, x.shape, x.dtype)
        np.multiply(x, 2, out=out)
        return None

    def in_place_bytes(self, x):
        out = adag.current_call().output(0, 5)
        out[:] = b"hello"
        return out

    def call_info(self, x):
        c = adag.current_call()
        return f"{c.ref} {c.actor} {c.device}".encode()

    def transpose(self, x):
        return x.T  # not contiguous: copied into the slot as a contiguous array

    def as_list(self, x):
        return [1.5, 2.5]  # numpy makes a float64 array of it

    def scalar(self, x):
        return 7

    def bad_return(self, x):
        return {"not": "an array"}

    @adag.method(returns=2)
    def not_a_pair(self, x):
        return x

    @adag.method(returns=2)
    def a_triple(self, x):
        return x, x, x


class Failing:
    def __init__(self, why):
        raise RuntimeError(f"cannot start: {why}")

    def run(self, x):
        return x


class Source:
    """A method without inputs."""

    def __init__(self):
        self.n = 0

    def next(self):
        self.n += 1
        return np.arange(self.n, dtype=np.float32)
