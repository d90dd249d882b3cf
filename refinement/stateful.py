"""Hypothesis drives the cluster one choice at a time; shrinking finds the smallest schedule
that breaks an invariant.

`ClusterHarness` is a step-by-step controllable simulator. It subclasses
refinement.sim.Simulator and reuses its node setup, stepping, effect application, traces,
focused checkers and the core's append outcomes unchanged; the adapter is `_push`: messages
the nodes send go to an explicit in-flight list (rather than the timed heap) and scheduled
restarts are dropped, so a rule decides which message arrives, when, how often, and when a
node comes back. Timers, client retries, refused connections and forced stops stay on the heap
and fire when virtual time advances. The private simulator members this touches (defined in
the simulator's layers, refinement.sim_base and above): `_push`, `_deliver`, `_drop`,
`_crash`, `_start_node`, `_shutdown`, `_heal`, `_client_send`, `_nodes`, `_heap`,
`_blocked`, `_partitions`, `_pending`, `_next_rid`, `_cluster`, `_trace`, `_tick`,
`_send_failed`, `_ClientRequest`, and the `_StopRun` it raises on a violation.

Every rule is written to the trace (kraft.trace_format's writer) as a "Rule" line before
the simulator's own lines of what it caused: the trace of a failing run is its schedule,
and `replay` re-runs a trace's rules.

`KraftMachine` is the RuleBasedStateMachine: rules deliver/drop/duplicate/delay a chosen
in-flight message, advance time, tick a node, run the network normally for a while, crash,
restart, partition (symmetric or one way), heal, client append, graceful shutdown; after
every rule every invariant (invariants.check_all, against the state before the rule) must
hold.
"""

from __future__ import annotations

import heapq
import io
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kraft.ids import NodeId
from kraft.trace_format import JsonObject, JsonValue, TraceEvent, parse_line
from refinement import invariants as inv
from refinement import sim_base as _sim
from refinement.faults import NONE
from refinement.invariants import ClusterState, Violation
from refinement.sim import ReplicaFactory, SimConfig, Simulator, core_replica_factory
from refinement.sim_clients import _ClientRequest

# ----------------------------------------------------------------------------- the harness


@dataclass(frozen=True, slots=True)
class InFlight:
    """A message on the wire, as the simulator would deliver it."""

    dst: int
    src: int
    kind: str
    payload: tuple[object, ...]


class ClusterHarness(Simulator):
    """A simulator whose network and node lifecycle are driven by explicit calls."""

    def __init__(
        self,
        config: SimConfig,
        *,
        replica_factory: ReplicaFactory = core_replica_factory,
        trace: io.StringIO | None = None,
    ) -> None:
        # No random faults, no random client: rules are the only source of both.
        config = replace(config, profile=NONE, append_rate=0.0, check_liveness=False)
        self.trace_out = trace if trace is not None else io.StringIO()
        super().__init__(config, replica_factory=replica_factory, trace=self.trace_out)
        self.inflight: list[InFlight] = []
        self.rules: list[JsonObject] = []
        self.violation: Violation | None = None
        # While True, sends go on the heap with a delay, as in a normal simulation.
        self._auto = False
        self._guard(self._boot)

    # ------------------------------------------------------------------ adapter

    def _push(self, at: int, kind: int, a: object, b: object = None) -> None:
        if kind == _sim._RESTART:
            return  # a rule restarts nodes
        if kind == _sim._DELIVER and not self._auto:
            assert isinstance(a, _sim._Node) and isinstance(b, tuple)
            src, msg = b[0], b[1]
            assert isinstance(src, int)
            self.inflight.append(InFlight(int(a.id), src, type(msg).__name__, b))
            return
        super()._push(at, kind, a, b)

    def _boot(self) -> None:
        for node in self._nodes.values():
            self._start_node(node, "Start")

    def _guard(self, fn: Callable[..., object], *args: object) -> None:
        """Run a simulator step; a violation it detects stops the harness."""
        if self.violation is not None:
            return
        try:
            fn(*args)
        except _sim._StopRun:
            self.violation = self.result.violations[-1]

    def _rule(self, name: str, **args: JsonValue) -> None:
        line: JsonObject = {"type": "Rule", "rule": name, **args}
        self.rules.append(line)
        assert self._trace is not None
        self._trace.write(
            TraceEvent(self._trace.count, self.now, None, "Rule", (name,), line, None)
        )

    def _dispatch(self, at: int, kind: int, a: object, b: object) -> None:
        """One heap entry, as Simulator._run handles it (the kinds a harness schedules)."""
        self.now = max(self.now, at)
        if kind == _sim._DELIVER:
            assert isinstance(a, _sim._Node) and isinstance(b, tuple)
            self._deliver(a, b)
        elif kind == _sim._TICK:
            assert isinstance(a, _sim._Node)
            self._tick(a, b)
        elif kind == _sim._CLIENT_SEND:
            assert isinstance(a, int)
            self._client_send(a, b)
        elif kind == _sim._SEND_FAILED:
            assert isinstance(a, _sim._Node) and isinstance(b, tuple)
            self._send_failed(a, b)
        elif kind == _sim._HEAL:
            assert isinstance(a, int)
            self._heal(a)
        elif kind == _sim._FORCE_STOP:
            assert isinstance(a, _sim._Node)
            if a.replica is not None and a.shutting_down and a.inc == b:
                self._crash(a)

    def _run_until(self, until: int) -> None:
        heap = self._heap
        while heap and heap[0][0] <= until and self.violation is None:
            at, _seq, kind, a, b = heapq.heappop(heap)
            self._guard(self._dispatch, at, kind, a, b)
        self.now = max(self.now, until)

    def _take(self, index: int) -> InFlight:
        return self.inflight.pop(index % len(self.inflight))

    # ------------------------------------------------------------------ rules

    @property
    def node_ids(self) -> list[int]:
        return sorted(int(n) for n in self._nodes)

    def is_up(self, node: int) -> bool:
        return self._nodes[NodeId(node)].replica is not None

    def deliver(self, index: int) -> None:
        m = self._take(index)
        self._rule("deliver", src=m.src, dst=m.dst, message=m.kind)
        self._guard(self._deliver, self._nodes[NodeId(m.dst)], m.payload)

    def drop(self, index: int) -> None:
        m = self._take(index)
        self._rule("drop", src=m.src, dst=m.dst, message=m.kind)
        self._guard(self._drop, m.src, NodeId(m.dst), m.payload[1], "rule")

    def duplicate(self, index: int) -> None:
        m = self.inflight[index % len(self.inflight)]
        self._rule("duplicate", src=m.src, dst=m.dst, message=m.kind)
        self.inflight.append(m)

    def delay(self, index: int) -> None:
        """Reorder: the message goes behind everything now in flight."""
        m = self._take(index)
        self._rule("delay", src=m.src, dst=m.dst, message=m.kind)
        self.inflight.append(m)

    def advance(self, ms: int) -> None:
        """Virtual time passes; timers fire, sends stay in flight."""
        self._rule("advance", ms=ms)
        self._run_until(self.now + ms)

    def tick(self, node: int) -> None:
        """Advance to the node's next timer (earlier timers of others fire first)."""
        self._rule("tick", node=node)
        replica = self._nodes[NodeId(node)].replica
        if replica is not None:
            self._run_until(max(self.now, replica.next_deadline_ms()))

    def run_network(self, ms: int) -> None:
        """The network works normally for `ms`: in-flight messages are delivered in order,
        with the simulator's delays, and so is what they cause."""
        self._rule("run_network", ms=ms)
        self._auto = True
        try:
            for m in self.inflight:
                dst = self._nodes[NodeId(m.dst)]
                super()._push(self.now + self._delay(), _sim._DELIVER, dst, m.payload)
            self.inflight.clear()
            self._run_until(self.now + ms)
        finally:
            self._auto = False
            self._reclaim()

    def _reclaim(self) -> None:
        """Messages still on the heap go back in flight, in delivery order."""
        keep: list[_sim._HeapEntry] = []
        moved: list[_sim._HeapEntry] = []
        for entry in self._heap:
            (moved if entry[2] == _sim._DELIVER else keep).append(entry)
        heapq.heapify(keep)
        self._heap[:] = keep
        for _at, _seq, _kind, a, b in sorted(moved, key=lambda e: (e[0], e[1])):
            self._push(0, _sim._DELIVER, a, b)

    def crash(self, node: int) -> None:
        """The node stops at once; its log loses what it did not flush."""
        self._rule("crash", node=node)
        n = self._nodes[NodeId(node)]
        if n.replica is not None:
            self._guard(self._crash, n)

    def restart(self, node: int) -> None:
        self._rule("restart", node=node)
        n = self._nodes[NodeId(node)]
        if n.replica is None:
            self._guard(self._start_node, n, "Restart")

    def shutdown(self, node: int) -> None:
        """Graceful shutdown: a leader resigns; the node stops on ShutdownComplete, or is
        stopped hard after twice the request timeout."""
        self._rule("shutdown", node=node)
        n = self._nodes[NodeId(node)]
        if n.replica is not None and not n.shutting_down:
            self._guard(self._shutdown, n)

    def partition(self, side: Sequence[int]) -> None:
        """Cut every link between `side` and the other nodes, both ways."""
        a = sorted({NodeId(i) for i in side})
        b = [i for i in map(NodeId, self.node_ids) if i not in a]
        self._rule("partition", side=[int(i) for i in a])
        self._block([link for x in a for y in b for link in ((x, y), (y, x))])

    def partition_one_way(self, src: int, dst: int) -> None:
        """Messages from src to dst are lost; the other direction works."""
        self._rule("partition_one_way", src=src, dst=dst)
        if src != dst:
            self._block([(NodeId(src), NodeId(dst))])

    def _block(self, links: list[tuple[NodeId, NodeId]]) -> None:
        if not links:
            return
        pid = len(self._partitions) + self.result.partitions + 1
        self.result.partitions += 1
        self._partitions[pid] = links
        for link in links:
            self._blocked[link] = self._blocked.get(link, 0) + 1

    def heal(self) -> None:
        self._rule("heal")
        for pid in sorted(self._partitions):
            self._guard(self._heal, pid)

    def client_append(self, node: int, records: int = 1) -> None:
        """A client sends an append of `records` values straight to `node`."""
        self._rule("client_append", node=node, records=records)
        rid = self._next_rid
        self._next_rid += 1
        values = tuple(b"c%d.%d" % (rid, k) for k in range(records))
        self._pending[rid] = _ClientRequest(rid, values, NodeId(node))
        self._guard(self._client_send, rid, node)

    # ------------------------------------------------------------------ state

    def cluster(self) -> ClusterState:
        """A snapshot of the cluster (copies: the simulator's own maps keep changing)."""
        c = self._cluster()
        return ClusterState(dict(c.nodes), c.voters, dict(c.leaders), c.acknowledged)

    def trace_text(self) -> str:
        return self.trace_out.getvalue()


# ----------------------------------------------------------------------------- replay


_RULES_WITH_INDEX = ("deliver", "drop", "duplicate", "delay")


def _find(h: ClusterHarness, line: JsonObject) -> int:
    """The in-flight message a recorded rule chose: the first with its src, dst and type."""
    for i, m in enumerate(h.inflight):
        if (m.src, m.dst, m.kind) == (line["src"], line["dst"], line["message"]):
            return i
    raise ValueError(f"no message in flight matches {line}")


def apply_rule(h: ClusterHarness, line: JsonObject) -> None:
    """Re-run one recorded rule."""
    name = line["rule"]
    if name in _RULES_WITH_INDEX:
        getattr(h, str(name))(_find(h, line))
    elif name in ("advance", "run_network"):
        getattr(h, str(name))(_int(line["ms"]))
    elif name in ("tick", "crash", "restart", "shutdown"):
        getattr(h, str(name))(_int(line["node"]))
    elif name == "client_append":
        h.client_append(_int(line["node"]), _int(line["records"]))
    elif name == "partition":
        side = line["side"]
        assert isinstance(side, list)
        h.partition([_int(x) for x in side])
    elif name == "partition_one_way":
        h.partition_one_way(_int(line["src"]), _int(line["dst"]))
    elif name == "heal":
        h.heal()
    else:
        raise ValueError(f"unknown rule {name!r}")


def _int(v: JsonValue) -> int:
    assert isinstance(v, int)
    return v


def rules_of_trace(lines: Iterable[str]) -> Iterator[JsonObject]:
    for n, text in enumerate(lines, start=1):
        if text.strip():
            ev = parse_line(text, n)
            if ev.action == "Rule" and ev.message is not None:
                yield ev.message


def replay(
    trace: Iterable[str],
    config: SimConfig,
    *,
    replica_factory: ReplicaFactory = core_replica_factory,
) -> tuple[ClusterHarness, list[Violation]]:
    """Re-run the rules of an ndjson trace; every invariant is checked after each rule.
    Returns the harness and the violations found (empty: none)."""
    h = ClusterHarness(config, replica_factory=replica_factory)
    before = h.cluster()
    for line in rules_of_trace(trace):
        apply_rule(h, line)
        found = check(h, before)
        if found:
            return h, found
        before = h.cluster()
    return h, []


def check(h: ClusterHarness, before: ClusterState) -> list[Violation]:
    """What the harness's focused checks found, else every invariant, unfocused."""
    if h.violation is not None:
        return [h.violation]
    return inv.check_all(before, h.cluster())


# ----------------------------------------------------------------------------- the machine

_ADVANCE_MS = (1, 20, 100, 400, 1000, 2500)


class KraftMachine(RuleBasedStateMachine):
    """Subclass to change `config` or `replica_factory` (e.g. a mutant core)."""

    config = SimConfig(seed=0, voters=3)
    replica_factory: ReplicaFactory = staticmethod(core_replica_factory)

    def __init__(self) -> None:
        super().__init__()
        self.h: ClusterHarness | None = None
        self.before: ClusterState | None = None

    @initialize(
        seed=st.integers(0, 3), warmup=st.sampled_from((0, 3000)), appends=st.integers(0, 3)
    )
    def boot(self, seed: int, warmup: int, appends: int) -> None:
        """A fresh cluster; half the runs start from a quiet network with a leader elected
        (a normal run of `warmup` ms) and some appends committed, so that short schedules
        reach faults that matter."""
        h = ClusterHarness(replace(self.config, seed=seed), replica_factory=self.replica_factory)
        self.h = h
        if warmup:
            h.run_network(warmup)
            for k in range(appends):
                h.client_append(1 + k % 3, 2)
            if appends:
                h.run_network(300)
        self.before = h.cluster()

    @property
    def harness(self) -> ClusterHarness:
        assert self.h is not None
        return self.h

    def _has_inflight(self) -> bool:
        return self.h is not None and bool(self.h.inflight)

    @precondition(_has_inflight)
    @rule(index=st.integers(0, 1 << 16))
    def deliver(self, index: int) -> None:
        self.harness.deliver(index)

    @precondition(_has_inflight)
    @rule(index=st.integers(0, 1 << 16))
    def drop(self, index: int) -> None:
        self.harness.drop(index)

    @precondition(_has_inflight)
    @rule(index=st.integers(0, 1 << 16))
    def duplicate(self, index: int) -> None:
        self.harness.duplicate(index)

    @precondition(_has_inflight)
    @rule(index=st.integers(0, 1 << 16))
    def delay(self, index: int) -> None:
        self.harness.delay(index)

    @rule(ms=st.sampled_from(_ADVANCE_MS))
    def advance(self, ms: int) -> None:
        self.harness.advance(ms)

    @rule(node=st.integers(1, 3))
    def tick(self, node: int) -> None:
        self.harness.tick(node)

    @rule(ms=st.sampled_from((50, 300, 1500, 3000)))
    def run_network(self, ms: int) -> None:
        self.harness.run_network(ms)

    @rule(node=st.integers(1, 3))
    def crash(self, node: int) -> None:
        self.harness.crash(node)

    @rule(node=st.integers(1, 3))
    def restart(self, node: int) -> None:
        self.harness.restart(node)

    @rule(node=st.integers(1, 3))
    def shutdown(self, node: int) -> None:
        self.harness.shutdown(node)

    @rule(side=st.sets(st.integers(1, 3), min_size=1, max_size=2))
    def partition(self, side: set[int]) -> None:
        self.harness.partition(sorted(side))

    @rule(src=st.integers(1, 3), dst=st.integers(1, 3))
    def partition_one_way(self, src: int, dst: int) -> None:
        self.harness.partition_one_way(src, dst)

    @rule()
    def heal(self) -> None:
        self.harness.heal()

    @rule(node=st.integers(1, 3), records=st.integers(1, 3))
    def client_append(self, node: int, records: int) -> None:
        self.harness.client_append(node, records)

    @invariant()
    def safety(self) -> None:
        h = self.h
        if h is None or self.before is None:
            return
        found = check(h, self.before)
        if found:
            note("schedule (rules):\n" + "\n".join(json.dumps(r) for r in h.rules))
            note("replayable ndjson trace (refinement.stateful.replay):\n" + h.trace_text())
            raise AssertionError("; ".join(str(v) for v in found))
        self.before = h.cluster()


def violation_names(error: BaseException) -> list[str]:
    """The invariant names in a KraftMachine failure message."""
    return [part.split(":", 1)[0].strip() for part in str(error).split("; ")]


# ----------------------------------------------------------------------------- sampling


class _Sampler(Simulator):
    """A normal simulation that keeps a snapshot of the cluster every `every` events (hooks
    the simulator's private `_after_step`)."""

    def __init__(self, config: SimConfig, every: int) -> None:
        super().__init__(config)
        self.every = every
        self.states: list[ClusterState] = []

    def _after_step(self, node: _sim._Node, *args: object) -> None:
        super()._after_step(node, *args)  # type: ignore[arg-type]
        if self.result.events % self.every == 0:
            c = self._cluster()
            self.states.append(
                ClusterState(dict(c.nodes), c.voters, dict(c.leaders), c.acknowledged)
            )


def sample_states(config: SimConfig, every: int = 50) -> list[ClusterState]:
    """Cluster states seen during one simulated run, one every `every` events."""
    s = _Sampler(config, every)
    s.run()
    return s.states
