"""A compiled DAG's statistics as dataclasses: CompiledDAG.stats().

    s = dag.stats(take=True)      # a snapshot: asks every actor (up to 1 s)
    print(s)                      # the tables of adag_stats_format
    s.bottleneck, s.actors[0].busy, s.ops[0].compute_p99_ns, s.channels[0].in_use

The fields are those of the C structs (include/adag/stats.h). Times are
measured only in a traced DAG (compile(trace_spans=N) or
Runtime(trace_spans=N)): without tracing they are 0 and `timed` is False.
"""
from dataclasses import dataclass, field
from typing import Optional, Tuple


@dataclass(frozen=True)
class ActorStats:
    """One actor (adag_actor_stats_t)."""
    name: str
    placement: str          # "thread", "process", "remote node N"
    device: str             # "host", or the device it is bound to: "emu:1", "cuda:0"
    nops: int               # ops in its schedule for this DAG
    count: int              # executions its loop finished
    busy_ns: int            # computing and publishing
    wait_input_ns: int      # blocked on an input
    wait_room_ns: int       # blocked on room in an output channel
    elapsed_ns: int         # since its loop started
    busy: float             # busy_ns / elapsed_ns, 0..1
    idle_ns: int            # since its last op ended
    doing: str              # traced DAGs: "waiting for input", "computing forward", ...; else ""
    unanswered: Optional[str]  # why its figures are missing (it did not answer), else None


@dataclass(frozen=True)
class OpStats:
    """One op of an actor's schedule: a method call or a collective (adag_op_stats_t)."""
    actor: str
    name: str               # the method's, or "allreduce", ...
    index: int              # its place in its actor's schedule
    count: int              # times it ran
    compute_ns: int
    compute_mean_ns: int
    compute_p50_ns: int
    compute_p99_ns: int
    compute_max_ns: int
    wait_input_ns: int      # totals
    wait_room_ns: int
    publish_ns: int


@dataclass(frozen=True)
class ChannelStats:
    """One channel (adag_channel_stats_t)."""
    name: str               # "stage1.forward[0]", "input[0]"
    kind: str               # its backend: "shm", "ucx", "device", ...
    writer: str             # an actor, or "driver"
    values: int             # published by its writer
    bytes: int
    slots: int
    in_use: int             # slots holding a value not released by every reader; -1: unknown
    slot_bytes: int
    host_bytes: int
    device_bytes: int


@dataclass(frozen=True)
class DagStats:
    """The DAG's counts (adag_dag_stats_t) and, for a snapshot (stats(take=True):
    adag_dag_stats_take), its actors, ops and channels and the tables' text."""
    name: str
    executed: int           # refs handed out by execute
    completed: int          # refs got successfully
    failed: int             # refs whose get reported a method/size error
    released: int
    max_inflight: int
    slot_capacity: int      # the default slot size
    nchannels: int
    shm_bytes: int          # the DAG's shared-memory segment
    device_bytes: int       # the device memory of its channels' slots
    communicators: int
    shared_communicators: int
    timed: bool             # times were measured (a traced DAG)
    bottleneck: str         # the busiest actor of a traced DAG; "" if none is known
    bottleneck_busy: float  # its busy share, 0..1
    actors: Tuple[ActorStats, ...] = ()
    ops: Tuple[OpStats, ...] = ()
    channels: Tuple[ChannelStats, ...] = ()
    text: Optional[str] = field(default=None, repr=False)  # adag_stats_format's (a snapshot)

    def __str__(self) -> str:
        if self.text is not None:
            return self.text
        line = (f"dag {self.name}: executed {self.executed}, completed {self.completed}, "
                f"failed {self.failed}, released {self.released}, max_inflight "
                f"{self.max_inflight}, {self.nchannels} channels")
        if self.bottleneck:
            line += f"; bottleneck {self.bottleneck} ({100 * self.bottleneck_busy:.1f}% busy)"
        return line + "\n(counts only: stats(take=True) for the actors, ops and channels)\n"
