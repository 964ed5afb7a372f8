"""Ctrl-C: a get, or a blocking execute, waiting in C (GIL released) still
raises KeyboardInterrupt in the main thread within a slice of its wait,
the ref still live; leaving `with adag.Runtime()` on it stops the
workers."""
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

import adag
from conftest import MODULE, as_i64, i64, one_stage


class Interrupted(Exception):
    pass


@pytest.fixture
def sigint_raises():
    """SIGINT raises Interrupted (not KeyboardInterrupt, which would end
    the test session were it raised late); sigint_raises(after) sends it."""
    def handler(signum, frame):
        raise Interrupted()
    old = signal.signal(signal.SIGINT, handler)
    timers = []

    def send(after):
        t = threading.Timer(after, os.kill, (os.getpid(), signal.SIGINT))
        t.start()
        timers.append(t)
    yield send
    for t in timers:
        t.join()
    signal.signal(signal.SIGINT, old)


@pytest.mark.parametrize("how", ["ref.get", "dag.get"])
def test_sigint_interrupts_a_blocking_get_and_keeps_the_ref(rt, counter, sigint_raises, how):
    dag = one_stage(rt, counter(), "sleep_ms")
    ref = dag.execute(i64(2500))
    sigint_raises(0.3)
    t0 = time.monotonic()
    with pytest.raises(Interrupted):
        ref.get() if how == "ref.get" else dag.get(ref)
    waited = time.monotonic() - t0
    assert waited < 1.5, f"the get went on {waited:.2f} s (the method sleeps 2.5 s)"
    assert as_i64(ref.get(timeout=10)[0]) == 2500  # the ref is still live


def test_sigint_interrupts_an_execute_waiting_for_room(rt, counter, sigint_raises):
    # max_inflight 1 and ref 0 unreleased: execute waits for room, up to
    # the 4 s execute timeout
    dag = one_stage(rt, counter(), "sleep_ms", max_inflight=1, execute_timeout=4)
    held = dag.execute(i64(0))
    sigint_raises(0.3)
    t0 = time.monotonic()
    with pytest.raises(Interrupted):
        dag.execute(i64(1))
    waited = time.monotonic() - t0
    assert waited < 2, f"execute went on {waited:.2f} s"
    assert as_i64(held.get(timeout=10)[0]) == 0
    assert as_i64(dag.execute(i64(7)).get(timeout=10)[0]) == 7


def test_sliced_waits_keep_their_timeouts(rt, counter):
    dag = one_stage(rt, counter(), "sleep_ms", max_inflight=1, execute_timeout=0.4)
    ref = dag.execute(i64(1500))
    t0 = time.monotonic()
    with pytest.raises(adag.TimeoutError, match="not ready within 300 ms"):
        ref.get(timeout=0.3)
    assert 0.25 < time.monotonic() - t0 < 1.2
    t0 = time.monotonic()
    with pytest.raises(adag.TimeoutError, match=r"no room after 400 ms: ref 0 .*max_inflight 1"):
        dag.execute(i64(1))
    assert 0.35 < time.monotonic() - t0 < 1.3
    assert as_i64(ref.get(timeout=10)[0]) == 1500


SCRIPT = r"""
import os, struct, sys
import adag
i64 = lambda x: struct.pack("<q", x)
how = sys.argv[2]
with adag.Runtime(teardown_timeout_ms=1000) as rt:
    a = rt.actor("counter", module=sys.argv[1], placement="process", init=i64(0))
    b = rt.actor("counter", module=sys.argv[1], placement="process", init=i64(1))
    g = rt.graph()
    g.output(g.bind(b, "add", g.bind(a, "sleep_ms", g.input(0))))
    dag = g.compile(max_inflight=1, execute_timeout=None)
    print(a.pid, b.pid, flush=True)
    ref = dag.execute(i64(30000))
    print("waiting", flush=True)
    if how == "get":
        ref.get()
    else:
        dag.execute(i64(1))   # no room until ref is released: forever
"""


def alive(pid):
    """True while pid runs (a zombie does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def marked(marker):
    """The live pids whose environment holds marker (the script's workers inherit it)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/environ", "rb") as f:
                env = f.read()
        except OSError:
            continue
        if marker.encode() in env and alive(int(p)):
            found.append(int(p))
    return found


@pytest.mark.parametrize("how", ["get", "execute"])
def test_ctrl_c_ends_the_driver_and_its_workers(tmp_path, how):
    if not os.path.exists(MODULE):
        pytest.skip(f"skipped: no test actor module {MODULE} (run make first)")
    script = tmp_path / "driver.py"
    script.write_text(SCRIPT)
    marker = f"ADAG_PYTEST_MARKER={uuid.uuid4().hex}"
    env = dict(os.environ, ADAG_PYTEST_MARKER=marker.split("=", 1)[1])
    p = subprocess.Popen([sys.executable, str(script), MODULE, how], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        workers = [int(x) for x in p.stdout.readline().split()]
        assert len(workers) == 2 and all(alive(w) for w in workers), p.stderr.read()
        assert p.stdout.readline().strip() == "waiting"
        time.sleep(0.3)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the driver still runs 10 s after SIGINT ({how})")
        took = time.monotonic() - t0
        # Python ends an uncaught KeyboardInterrupt by SIGINT itself
        assert p.returncode == -signal.SIGINT, (p.returncode, err)
        assert "KeyboardInterrupt" in err
        assert took < 8, f"{took:.1f} s from SIGINT to exit"
        deadline = time.monotonic() + 5
        while any(alive(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(w) for w in workers), f"workers {workers} survived the driver"
        assert marked(marker) == []
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        for pid in marked(marker):
            os.kill(pid, signal.SIGKILL)
