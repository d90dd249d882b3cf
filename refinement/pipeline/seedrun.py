"""One unit of a campaign: run the simulator on one (profile, seed) and digest its trace.

This is the code the Spark executors run; it imports no Spark. The simulator writes its
ndjson trace into a `TraceDigest` (a text stream that parses each line as it arrives), which
keeps what the campaign needs: coverage counts, election timings, and, for the seeds whose
events are kept, the event columns as one compressed Arrow IPC stream. Commit latencies come
from the simulator's result (SimResult.commit_latency_ms: acceptance to the core's
AppendCommitted, kraft.core.commits), not from the trace.

Coverage classes:
- spec actions: the names of kraft.core.vocabulary.Action, counted from a line's `actions`
  (every ActionTaken of the step; Crash is a simulator line named after the spec action);
- sim actions: what the simulator itself did (faults, starts and stops, disk losses);
- no-op steps: an event the core handled without taking any action (a Tick before a timer,
  a ClientAppend refused by a non-leader, a stale response); counted, not part of coverage.
A (state, action) pair counts an action under the state the node was in *before* the step
(the state that enables it in the spec); a node that is not running is "Down".
"""

from __future__ import annotations

import io
import math
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Protocol, TypeAlias, cast

from kraft.core.vocabulary import Action, ReplicaState
from kraft.trace_format import TraceEvent, TraceWriter, parse_line
from refinement.faults import PROFILES
from refinement.sim import (
    ReplicaFactory,
    SimConfig,
    SimResult,
    Simulator,
    core_replica_factory,
    simulate,
)

if TYPE_CHECKING:
    import pyarrow as pa

SPEC_ACTIONS: tuple[str, ...] = tuple(a.value for a in Action)
SIM_ACTIONS: tuple[str, ...] = (
    "Start",
    "Stop",
    "Shutdown",
    "SendFailed",
    "DropMessage",
    "DuplicateMessage",
    "Partition",
    "Heal",
    # The disk-loss profile: an observer crashes with its data directory gone.
    "LoseDisk",
    # The `+reconfig` profiles: a voter change's answer reaches the operator.
    "OperatorAnswered",
)
# Event names a line carries when the core took no action on that event (KIP-630: the state
# machine's ask for a snapshot with nothing new to take, a snapshot written or validated that
# the core did not act on, such as a fetched one that failed validation).
NOOP_EVENTS = frozenset(
    {
        "Tick",
        "Receive",
        "ClientAppend",
        "AskCreateSnapshot",
        "SnapshotWritten",
        "SnapshotValidated",
        "VoterVersionsChecked",
    }
)
DOWN = "Down"
PAIR_STATES: tuple[str, ...] = (*(s.value for s in ReplicaState), DOWN)
# Actions a replica performs (or suffers) in a state: the (state, action) matrix columns.
PAIR_ACTIONS: tuple[str, ...] = (*SPEC_ACTIONS, "Start", "Stop", "Shutdown")

KIND_SPEC = "spec"
KIND_SIM = "sim"
KIND_NOOP = "noop"
_KIND_OF: dict[str, str] = {
    **dict.fromkeys(SIM_ACTIONS, KIND_SIM),
    **dict.fromkeys(SPEC_ACTIONS, KIND_SPEC),
}
_PAIR_ACTIONS = frozenset(PAIR_ACTIONS)
_NOT_NODE_STATE = frozenset({"DropMessage", "DuplicateMessage"})
_STARTS = frozenset({"Start", "Restart"})

# Event columns, in the order of the `events` dataset.
EVENT_COLUMNS: tuple[str, ...] = (
    "seed",
    "profile",
    "index",
    "time",
    "node",
    "action",
    "actions",
    "epoch",
    "state",
    "leader",
    "end_offset",
    "hwm",
    "message_type",
)


def percentile(sorted_values: Sequence[int], p: float) -> int | None:
    """Nearest-rank percentile (an observed value, so it is exact and integral)."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = max(1, math.ceil(p / 100.0 * n))
    return sorted_values[min(rank, n) - 1]


class TraceDigest(io.StringIO):
    """A text stream the simulator writes its trace into; digests line by line."""

    def __init__(self, *, keep_events: bool) -> None:
        super().__init__()
        self._buf = ""
        self.lines = 0
        self.counts: Counter[tuple[str, str]] = Counter()  # (kind, name) -> events
        self.pairs: Counter[tuple[str, str]] = Counter()  # (pre-state, action) -> events
        # The index of the line each class first occurs on: a trace's prefix up to it covers it.
        self.first: dict[tuple[str, str], int] = {}  # (kind, name) -> line index
        self.pair_first: dict[tuple[str, str], int] = {}  # (pre-state, action) -> line index
        self._state: dict[int, str] = {}
        self.first_leader_ms: int | None = None
        self.election_ms: list[int] = []
        self._round_start: int | None = 0  # the first election starts with the cluster
        self._keep = keep_events
        self.columns: dict[str, list[object]] = {c: [] for c in EVENT_COLUMNS[2:]}

    def write(self, s: str) -> int:
        if "\n" not in s:
            self._buf += s
            return len(s)
        *lines, self._buf = (self._buf + s).split("\n")
        for line in lines:
            if line:
                self._digest(line)
        return len(s)

    def _digest(self, line: str) -> None:
        self.write_event(parse_line(line, self.lines + 1))

    def write_event(self, event: TraceEvent) -> None:
        """The same as writing its line, without the JSON round trip."""
        self.digest(
            event.index,
            event.time,
            event.node,
            event.action,
            event.actions,
            event.message,
            event.state,
        )

    def digest(  # noqa: PLR0917 (the fields of a trace line)
        self,
        index: int,
        t: int,
        node: int | None,
        action: str,
        actions: Sequence[str],
        message: Mapping[str, object] | None,
        state: Mapping[str, object] | None,
    ) -> None:
        self.lines += 1
        counts = self.counts
        first = self.first
        if actions:
            names: Iterable[str] = actions
        elif action in NOOP_EVENTS:
            names = ()
            key = (KIND_NOOP, action)
            counts[key] += 1
            first.setdefault(key, index)
        elif action == "Violation":
            names = ()
        else:
            names = (action,)
        pre = DOWN if node is None else self._state.get(node, DOWN)
        for name in names:
            key = (_KIND_OF.get(name, KIND_SIM), name)
            counts[key] += 1
            first.setdefault(key, index)
            if node is not None and name in _PAIR_ACTIONS:
                pair = (pre, name)
                self.pairs[pair] += 1
                self.pair_first.setdefault(pair, index)
                if name in _STARTS and state is not None:
                    # What a (re)start does next, it does in the state it started in.
                    started_in = state["state"]
                    assert isinstance(started_in, str)
                    pre = started_in
        if actions:
            if "ElectionTimeout" in actions and self._round_start is None:
                self._round_start = t
            if "BecomeLeader" in actions:
                if self.first_leader_ms is None:
                    self.first_leader_ms = t
                start = self._round_start
                self.election_ms.append(t - (t if start is None else start))
                self._round_start = None
        if state is not None and node is not None and action not in _NOT_NODE_STATE:
            name_of_state = state["state"]
            assert isinstance(name_of_state, str)
            self._state[node] = name_of_state
        if self._keep:
            self._keep_event(index, t, node, action, actions, message, state)

    def _keep_event(  # noqa: PLR0917 (the fields of a trace line)
        self,
        index: int,
        t: int,
        node: int | None,
        action: str,
        actions: Sequence[str],
        message: Mapping[str, object] | None,
        state: Mapping[str, object] | None,
    ) -> None:
        c = self.columns
        c["index"].append(index)
        c["time"].append(t)
        c["node"].append(node)
        c["action"].append(action)
        c["actions"].append(list(actions))
        c["message_type"].append(None if message is None else message.get("type"))
        if state is None:
            for k in ("epoch", "state", "leader", "end_offset", "hwm"):
                c[k].append(None)
        else:
            c["epoch"].append(state["epoch"])
            c["state"].append(state["state"])
            c["leader"].append(state["leader"])
            c["end_offset"].append(state["endOffset"])
            c["hwm"].append(state["hwm"])


def events_arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("seed", pa.int64()),
            ("profile", pa.string()),
            ("index", pa.int64()),
            ("time", pa.int64()),
            ("node", pa.int32()),
            ("action", pa.string()),
            ("actions", pa.list_(pa.string())),
            ("epoch", pa.int32()),
            ("state", pa.string()),
            ("leader", pa.int32()),
            ("end_offset", pa.int64()),
            ("hwm", pa.int64()),
            ("message_type", pa.string()),
        ]
    )


def encode_events(seed: int, profile: str, columns: dict[str, list[object]]) -> bytes:
    """The kept events of one seed as a zstd-compressed Arrow IPC stream."""
    import pyarrow as pa

    schema = events_arrow_schema()
    n = len(columns["index"])
    arrays = [pa.array([seed] * n, pa.int64()), pa.array([profile] * n, pa.string())]
    arrays += [pa.array(columns[name], schema.field(name).type) for name in EVENT_COLUMNS[2:]]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, schema, options=options) as writer:
        writer.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def decode_events(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: rows of (seed, profile, ipc) in, the events they hold out."""
    import pyarrow as pa

    for batch in batches:
        for blob in batch.column("ipc").to_pylist():
            if blob is None:
                continue
            with pa.ipc.open_stream(pa.py_buffer(blob)) as reader:
                yield from reader


@dataclass(frozen=True, slots=True)
class Unit:
    """One simulator run of a campaign."""

    profile: str
    seed: int


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What every unit of a campaign shares (shipped to the executors)."""

    events: int
    keep_events_every: int  # keep the events of seeds divisible by this; 0: none
    mutant: str | None = None
    voters: int = 3

    def keeps(self, seed: int) -> bool:
        return self.keep_events_every > 0 and seed % self.keep_events_every == 0

    def config(self, unit: Unit) -> SimConfig:
        return SimConfig(
            seed=unit.seed,
            voters=self.voters,
            max_events=self.events,
            profile=PROFILES[unit.profile],
        )

    def factory(self) -> ReplicaFactory:
        if self.mutant is None:
            return core_replica_factory
        from refinement.pipeline.mutants import MUTANTS

        return MUTANTS[self.mutant]


# A seeds-dataset row, in the order of campaign schemas.SEEDS (tuples cross to the JVM).
SeedRow: TypeAlias = tuple[object, ...]


def replay_command(unit: Unit, spec: RunSpec, result: SimResult) -> str:
    """The command that reruns this unit alone (a mutant run needs the campaign to rerun)."""
    if spec.mutant is None:
        return result.replay_command
    return (
        f"python -m refinement.pipeline.campaign --seed {unit.seed} --seeds 1"
        f" --profile {unit.profile} --events {spec.events} --mutant {spec.mutant}"
    )


def seed_row(
    unit: Unit, spec: RunSpec, result: SimResult, digest: TraceDigest, wall_ms: int
) -> SeedRow:
    lat = sorted(result.commit_latency_ms)
    first, pair_first = digest.first, digest.pair_first
    counts = sorted(
        (name, kind, n, first[(kind, name)]) for (kind, name), n in digest.counts.items()
    )
    covered = sorted({c[0] for c in counts if c[1] != KIND_NOOP})
    return (
        unit.seed,
        unit.profile,
        result.events,
        digest.lines,
        result.virtual_time_ms,
        result.elections,
        digest.first_leader_ms,
        list(digest.election_ms),
        result.committed,
        result.accepted,
        result.lost,
        len(lat),
        percentile(lat, 50),
        percentile(lat, 99),
        lat[-1] if lat else None,
        lat,
        result.crashes,
        result.shutdowns,
        result.partitions,
        result.dropped,
        result.recovery_ms,
        [(v.name, v.detail) for v in result.violations],
        result.ok,
        replay_command(unit, spec, result),
        covered,
        [list(r) for r in counts],
        [[s, a, n, pair_first[(s, a)]] for (s, a), n in sorted(digest.pairs.items())],
        wall_ms,
    )


class _EventSink:
    """Stands in for the simulator's TraceWriter: hands each TraceEvent to the digest as an
    object, sparing the JSON encoding and decoding of every line (about 40% of a run)."""

    __slots__ = ("_digest", "count")

    def __init__(self, digest: TraceDigest) -> None:
        self._digest = digest
        self.count = 0

    def write(self, event: TraceEvent) -> None:
        self._digest.write_event(event)
        self.count += 1


def simulate_into(
    config: SimConfig, factory: ReplicaFactory, digest: TraceDigest, *, fast: bool = True
) -> SimResult:
    """Run the simulator with its trace going into `digest`.

    Fast path: the simulator's trace writer replaced by an event sink (the writer is a
    private detail of refinement.sim, so this is done only when it is found where
    expected); otherwise, and with fast=False, the ndjson lines are parsed back."""
    sim = Simulator(config, replica_factory=factory, trace=digest)
    if fast and isinstance(getattr(sim, "_trace", None), TraceWriter):
        sim._trace = cast(TraceWriter, _EventSink(digest))
    return sim.run()


def run_unit(unit: Unit, spec: RunSpec) -> tuple[SeedRow, bytes | None]:
    """Run one unit: its seeds row and, if its events are kept, their IPC stream."""
    keep = spec.keeps(unit.seed)
    digest = TraceDigest(keep_events=keep)
    started = time.perf_counter()
    result = simulate_into(spec.config(unit), spec.factory(), digest)
    wall_ms = int((time.perf_counter() - started) * 1000)
    events = encode_events(unit.seed, unit.profile, digest.columns) if keep else None
    return seed_row(unit, spec, result, digest, wall_ms), events


class _FirstLines(io.TextIOBase):
    """A text stream passing the first `limit` lines (None: all) on to `out`, dropping the
    rest, and counting the lines it passed."""

    def __init__(self, out: IO[str], limit: int | None) -> None:
        super().__init__()
        self._out = out
        self._limit = limit
        self.written = 0

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        limit = self._limit
        cut = 0
        while limit is None or self.written < limit:
            nl = s.find("\n", cut)
            if nl < 0:
                cut = len(s)
                break
            cut = nl + 1
            self.written += 1
        if cut:
            self._out.write(s[:cut])
        return len(s)


def write_trace(unit: Unit, spec: RunSpec, path: str, *, lines: int | None = None) -> int:
    """Re-run one unit with its ndjson trace written to `path` (the same bytes every time);
    with `lines`, only the trace's first that many lines (the run itself is not cut short).
    Returns the number of lines written."""
    with open(path, "w", encoding="utf-8") as out:
        first = _FirstLines(out, lines)
        simulate(spec.config(unit), replica_factory=spec.factory(), trace=cast(IO[str], first))
        return first.written


class Progress(Protocol):
    """What a task reports progress to (a Spark accumulator on the executors)."""

    def add(self, term: int) -> None: ...


def run_units(
    units: Iterable[Unit], spec: RunSpec, progress: Progress | None = None
) -> Iterator[tuple[SeedRow, bytes | None]]:
    """mapPartitions body: run each unit of a partition in turn."""
    for unit in units:
        yield run_unit(unit, spec)
        if progress is not None:
            progress.add(1)
