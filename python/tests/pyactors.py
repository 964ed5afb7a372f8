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

    def via_dlpack(self, x):
        """Argument 0 through DLPack (adag.current_call().arg), kept past the call."""
        self.kept = adag.current_call().arg(0)
        got = np.from_dlpack(self.kept)
        return np.array(got) + 1  # a copy: the view dies with the call

    def kept_arg(self, x):
        try:
            self.kept.__dlpack__()
        except ValueError as e:
            return f"{self.kept.valid} {e}".encode()
        return b"still valid"

    @adag.method(returns=2)
    def where(self, x):
        """Return 0 written in place, and where each return's slot is."""
        c = adag.current_call()
        out = c.output(0, x.shape, x.dtype)
        np.add(x, 1, out=out)
        return None, f"{c.output_device(0)} {c.output_device(1)} {c.device}".encode()

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
