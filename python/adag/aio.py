"""asyncio for adag: await the executions of a compiled DAG.

    outs = await dag.execute_async(x)         # list of bytes, as dag.execute(x).get()
    ref = dag.execute(y)
    outs = await ref                          # or: await ref.wait_async(timeout=5)
    many = await asyncio.gather(*(dag.execute_async(v) for v in values))

How it works. Per DAG and event loop there is one watch while coroutines
of that loop wait on that DAG:

- Results: the watch registers one reader (loop.add_reader) on a dup of
  the DAG's fd (adag_dag_fd: level-triggered, readable while some result
  is in and neither got nor released). When it is readable, every awaited
  ref is probed with Ref.try_get() (no wait) and each result that is in
  goes to its coroutine, in whatever order the results complete. The
  reader is removed once no coroutine waits. A result that is in but that
  no coroutine of this loop awaits (a ref executed and kept elsewhere)
  keeps the fd readable: the watch then probes on a timer, backing off,
  instead of spinning, until it is got or released.
- Room: execute_async executes without blocking (block=False). While the
  window is full (max_inflight refs unreleased: adag.AgainError) it waits,
  in FIFO order, for a result this watch delivers (its release makes
  room), for a coroutine that got room (it passes the turn on), or for a
  timer that backs off from 1 ms to 50 ms (room made elsewhere: a release
  by other code, a released ref completing). If the window does not move
  for the DAG's execute timeout (compile's execute_timeout) the waiting
  executes raise adag.TimeoutError, as a blocking execute would.
- Cancellation and timeouts: an execute_async cancelled (or out of time)
  while its execution runs releases the ref, so its slots come back when
  it completes; one cancelled while waiting for room leaves nothing. An
  awaited Ref that is cancelled stays live (it is the caller's: get it
  again, or release it).

A DAG that fails or is closed makes its fd readable: the coroutines that
wait on it raise the failure (adag.ActorDiedError, adag.ClosedError). The
fd is dup'ed, so that a DAG closed while they wait never leaves the loop
watching a number the process reuses.
"""
import asyncio
import collections
import os

from . import _adag

_TIMEOUT_STATUS = -3  # ADAG_ERR_TIMEOUT (include/adag/core.h)
_MIN_DELAY = 0.001    # the timer's first delay, after each result or execute
_MAX_DELAY = 0.05     # ... doubling up to this while nothing moves

_watches = {}  # (dag, loop) -> _Watch, while a coroutine of loop waits on dag


def _timeout_error(msg):
    e = _adag.TimeoutError(msg)
    e.status = _TIMEOUT_STATUS
    return e


def _expire(fut, msg):
    if not fut.done():
        fut.set_exception(_timeout_error(msg))


def _watch(dag, loop):
    w = _watches.get((dag, loop))
    if w is None:
        w = _watches[(dag, loop)] = _Watch(dag, loop)
    return w


class _Watch:
    """The coroutines of one loop waiting on one DAG: for results and for room."""

    def __init__(self, dag, loop):
        self.dag = dag
        self.loop = loop
        self.fd = os.dup(dag.fileno())  # ours: valid even once the DAG closes its own
        self.results = {}               # ref id -> (ref, future)
        self.room = collections.deque()  # futures of executes waiting for room, FIFO
        self.nroom = 0                  # executes between their first AgainError and room
        self.reading = False            # the reader is registered
        self.polling = False            # readable for a result nobody here awaits: timer
        self.timer = None
        self.delay = _MIN_DELAY
        self.moved = loop.time()        # when the window last moved (a result, an execute)
        self.room_timeout = dag.execute_timeout
        self.why = ""                   # the last AgainError: what holds the room

    # ---- results ----

    def add(self, ref, fut):
        if ref.id in self.results:
            raise ValueError(f"Ref.wait_async: ref {ref.id} is awaited already")
        self.results[ref.id] = (ref, fut)
        self._arm()

    def drop(self, ref, fut):
        cur = self.results.get(ref.id)
        if cur is not None and cur[1] is fut:
            del self.results[ref.id]
        self._arm()

    def _deliver(self):
        """Gives every result that is in to its coroutine; how many."""
        n = 0
        for rid in sorted(self.results):
            ref, fut = self.results[rid]
            if fut.done():  # out of time: its coroutine drops it
                continue
            try:
                outs = ref.try_get()
            except Exception as e:  # a failed execution, a closed DAG
                del self.results[rid]
                fut.set_exception(e)
                n += 1
                continue
            if outs is not None:
                del self.results[rid]
                fut.set_result(outs)
                n += 1
        if n:
            self.executed(n)
        return n

    def _readable(self):
        if not self._deliver() and self.results:
            self.polling = True
        self._arm()

    def _tick(self):
        self.timer = None
        self.polling = False  # the reader again: it tells whether that result is still in
        if not self._deliver():
            self.delay = min(2 * self.delay, _MAX_DELAY)
            if (self.room and self.room_timeout is not None
                    and self.loop.time() - self.moved > self.room_timeout):
                err = (f"CompiledDAG.execute_async: no room after {self.room_timeout:g} s: "
                       f"{self.why}")
                while self.room:
                    _expire(self.room.popleft(), err)
            self.wake_room(1)
        self._arm()

    # ---- room ----

    def executed(self, n=1):
        """The window moved (n results released, or an execute got room):
        n executes waiting for room try again."""
        self.moved = self.loop.time()
        self.delay = _MIN_DELAY
        self.wake_room(n)

    def wake_room(self, n):
        while n and self.room:
            fut = self.room.popleft()
            if not fut.done():
                fut.set_result(None)
                n -= 1

    async def wait_room(self, deadline, front):
        fut = self.loop.create_future()
        if front:  # it waited before: its turn comes first
            self.room.appendleft(fut)
        else:
            self.room.append(fut)
        self._arm()
        handle = None
        if deadline is not None:
            handle = self.loop.call_at(
                deadline, _expire, fut,
                f"CompiledDAG.execute_async: no room within the timeout: {self.why}")
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.wake_room(1)  # it was woken, then cancelled: the turn goes on
            raise
        finally:
            if handle is not None:
                handle.cancel()
            try:
                self.room.remove(fut)
            except ValueError:
                pass
            self._arm()

    # ---- the reader and the timer ----

    def _arm(self):
        if self.fd < 0:
            return
        want = bool(self.results) and not self.polling
        if want != self.reading:
            if want:
                self.loop.add_reader(self.fd, self._readable)
            else:
                self.loop.remove_reader(self.fd)
            self.reading = want
        if not self.polling and not self.room:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if not self.results and not self.nroom:
                self._close()
            return
        when = self.loop.time() + self.delay
        if self.timer is not None:
            if self.timer.when() <= when:
                return
            self.timer.cancel()
        self.timer = self.loop.call_at(when, self._tick)

    def _close(self):
        if _watches.get((self.dag, self.loop)) is self:
            del _watches[(self.dag, self.loop)]
        if self.reading:
            self.loop.remove_reader(self.fd)
            self.reading = False
        os.close(self.fd)
        self.fd = -1


async def _result(dag, ref, loop, deadline, what):
    outs = ref.try_get()
    if outs is not None:
        return outs
    w = _watch(dag, loop)
    fut = loop.create_future()
    w.add(ref, fut)
    handle = None
    if deadline is not None:
        handle = loop.call_at(deadline, _expire, fut,
                              f"{what}: ref {ref.id} of DAG {dag.name} not ready in time")
    try:
        return await fut
    finally:
        if handle is not None:
            handle.cancel()
        w.drop(ref, fut)


async def _execute_in_turn(dag, inputs, loop, deadline, why):
    """Executes once there is room: waits its turn, tries, waits again first
    in line. The watch lives as long as it does (its stall clock with it)."""
    w = _watch(dag, loop)
    w.nroom += 1
    try:
        front = False
        while True:
            w.why = why
            await w.wait_room(deadline, front)
            front = True
            try:
                ref = dag.execute(*inputs, block=False)
            except _adag.AgainError as e:
                why = str(e)
                continue
            w.executed()
            return ref
    finally:
        w.nroom -= 1
        w._arm()


async def execute(dag, *inputs, timeout=None):
    """CompiledDAG.execute_async(*inputs, timeout=None): executes, without
    blocking the loop while the window is full, and returns the outputs as
    a list of bytes (Ref.get's). timeout: seconds for the whole (None:
    forever); past it adag.TimeoutError, and the execution, if it started,
    is released. Failures raise as Ref.get does."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    try:
        ref = dag.execute(*inputs, block=False)
    except _adag.AgainError as e:
        ref = await _execute_in_turn(dag, inputs, loop, deadline, str(e))
    else:
        w = _watches.get((dag, loop))
        if w is not None:
            w.executed()
    try:
        return await _result(dag, ref, loop, deadline, "CompiledDAG.execute_async")
    except BaseException:
        ref.release()  # cancelled or out of time: its slots come back once it completes
        w = _watches.get((dag, loop))
        if w is not None:
            w.wake_room(1)
        raise


async def wait(ref, timeout=None):
    """Ref.wait_async(timeout=None) and `await ref`: the outputs as a list
    of bytes, as Ref.get gives them (the ref released), awaited. Past the
    timeout (seconds; None: forever) adag.TimeoutError, the ref still live;
    cancelled, the ref stays live too."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    return await _result(ref.dag, ref, loop, deadline, "Ref.wait_async")


def _await_ref(ref):
    return wait(ref).__await__()
