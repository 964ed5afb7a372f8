"""python/examples run as a user runs them, each in its own interpreter:
they check their own results and exit 0."""
import importlib.util
import os
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


def run(name, *args):
    out = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args],
                         capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


@pytest.mark.parametrize("placement", [[], ["--threads"]])
def test_numpy_pipeline(placement):
    out = run("pipeline.py", "--batches", "40", *placement)
    assert "40 batches of 64x256 through 3" in out
    assert "every result equal to numpy's" in out


def test_torch_mlp():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("skipped: torch is not installed for this python")
    out = run("torch_mlp.py", "--batches", "12")
    assert "12 batches of 32x256 through 2 stages" in out
    assert "TOO LARGE" not in out


def test_asyncio_server():
    out = run("asyncio_server.py", "--clients", "16", "--requests", "10")
    assert "160 requests from 16 clients through 2 actors" in out
    assert "every answer right" in out
