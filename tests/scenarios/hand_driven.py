"""One replica driven by hand, for the scenario tests that play every other node themselves.

`replica_over` builds a Replica over a MemoryLog; `HandDriven` starts it and drives it: each
step performs the log effects as a node's driver does and keeps the effects, ticks come at the
deadlines the replica reports, and its election is won by granting its (pre-)vote requests.
Whatever differs between the tests (voters, timing, election state, start time, the log) is
a parameter; what a test records or sends of its own stays in the test file."""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import replace

from memory_logs import key, perform_append

from kraft.core.effects import AppendToLog, Effect, ElectionState, FlushLog, Send
from kraft.core.events import Event, Receive, Tick
from kraft.core.messages import VoteRequest, VoteResponse
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, NodeId, Offset, OffsetAndEpoch
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.memory_log import MemoryLog

S = ReplicaState


def replica_over(
    log: MemoryLog,
    cluster: ClusterId,
    voters: Iterable[int],
    *,
    me: int = 1,
    timing: QuorumTiming | None = None,
    election_state: ElectionState | None = None,
    snapshot_ids: tuple[OffsetAndEpoch, ...] = (),
    voter_history: tuple[tuple[Offset, VoterSet], ...] | None = None,
    start_ms: int = 0,
) -> Replica:
    """Replica `me` of `cluster` with the static `voters` (node ids, keyed by
    memory_logs.key), not yet started, over `log` holding the snapshots `snapshot_ids` (none
    to serve). `voter_history` stands for the voter sets the log states (a dynamic quorum's
    bootstrap checkpoint). Its random source is random.Random(0)."""
    state = log_state_of(log, snapshot_ids)
    if voter_history is not None:
        state = replace(state, voter_history=voter_history)
    return Replica(
        ReplicaConfig(key(me), cluster, tuple(key(v) for v in voters), timing or QuorumTiming()),
        election_state=election_state,
        log_state=state,
        reader=BatchReader(log),
        rng=random.Random(0),
        now_ms=start_ms,
    )


class HandDriven:
    """A replica built by `replica_over` (over `log`, a fresh MemoryLog by default) and
    started at `start_ms`. Each step performs its AppendToLog and FlushLog effects on the log
    and keeps its effects: the last step's in `last`, every one with the time of its step in
    `effects`. `now` is the latest time the replica was given."""

    def __init__(
        self,
        cluster: ClusterId,
        voters: Iterable[int],
        *,
        me: int = 1,
        timing: QuorumTiming | None = None,
        election_state: ElectionState | None = None,
        log: MemoryLog | None = None,
        voter_history: tuple[tuple[Offset, VoterSet], ...] | None = None,
        start_ms: int = 0,
    ) -> None:
        self.log = MemoryLog() if log is None else log
        self.timing = timing or QuorumTiming()
        self.replica = replica_over(self.log, cluster, voters, me=me, timing=self.timing,
                                    election_state=election_state, voter_history=voter_history,
                                    start_ms=start_ms)  # fmt: skip
        self.now = start_ms
        self.effects: list[tuple[int, Effect]] = []
        self.last: list[Effect] = []
        self._perform(self.replica.start())

    def _perform(self, effects: list[Effect]) -> list[Effect]:
        for e in effects:
            if isinstance(e, AppendToLog):
                perform_append(self.log, e)
            elif isinstance(e, FlushLog):
                self.log.flush()
        self.effects += [(self.now, e) for e in effects]
        self.last = effects
        return effects

    def step(self, ev: Event) -> list[Effect]:
        self.now = max(self.now, ev.now_ms)
        return self._perform(self.replica.step(ev))

    def tick(self, at: int | None = None) -> list[Effect]:
        """A Tick at `at`; by default at the replica's next deadline, or now if that passed."""
        return self.step(Tick(max(self.replica.next_deadline_ms(), self.now) if at is None else at))

    def tick_until(self, state: ReplicaState) -> None:
        """Tick at each deadline until the replica is in `state`."""
        while self.replica.view().state is not state:
            self.tick()

    def vote_request_to(self, dst: int) -> VoteRequest:
        """The one (pre-)vote request the last step sent to `dst`."""
        [req] = [
            e.message
            for e in self.last
            if isinstance(e, Send) and e.dst == dst and isinstance(e.message, VoteRequest)
        ]
        return req

    def grant(self, src: int, of: VoteRequest | None) -> list[Effect]:
        """Voter `src` grants a (pre-)vote now, in the replica's epoch (the one its pre-vote
        and vote requests carry), answering `of` (None: no request of the replica's)."""
        answer = VoteResponse(ErrorCode.NONE, NO_NODE, self.replica.view().epoch, True)
        return self.step(Receive(self.now, NodeId(src), answer, of))

    def elect(self, voter: int = 2) -> int:
        """Tick until the election timer makes the replica Prospective, then win the pre-vote
        and the vote with `voter`'s grants of the requests just sent to it (a majority of
        three); the time it became Leader."""
        self.tick_until(S.PROSPECTIVE)
        self.grant(voter, self.vote_request_to(voter))
        assert self.replica.view().state is S.CANDIDATE
        self.grant(voter, self.vote_request_to(voter))
        assert self.replica.view().state is S.LEADER
        return self.now

    def run(
        self,
        until: int,
        events: Mapping[int, list[Event]] | None = None,
        *,
        stays: ReplicaState | None = None,
    ) -> None:
        """Tick at each deadline up to `until`, handing the replica `events` (by time) on the
        way: an event's time first, then a tick of that instant. With `stays`, the replica
        must be in that state after every step."""
        pending = dict(sorted((events or {}).items()))
        last, again = -1, 0
        while True:
            tick = max(self.replica.next_deadline_ms(), self.now)
            again = again + 1 if tick == last else 0
            last = tick
            assert again < 20, f"the replica asks to be ticked again and again at t={tick}ms"
            at = min([tick, *pending])
            if at > until:
                self.now = until
                return
            if at in pending:
                for ev in pending.pop(at):
                    self.step(ev)
            else:
                self.step(Tick(at))
            if stays is not None:
                assert self.replica.view().state is stays

    @property
    def sends(self) -> list[tuple[int, Send]]:
        """Every Send so far, with the time of its step."""
        return [(at, e) for at, e in self.effects if isinstance(e, Send)]

    @property
    def end(self) -> int:
        return int(self.replica.view().end_offset)
