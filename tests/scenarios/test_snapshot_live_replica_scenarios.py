"""Where a leader's log start may move under KIP-630's rule alone (LogStartPolicy.KIP_630,
the simulator's; "When to Increase the LogStartOffset"): up to the largest snapshot every
live replica has replicated, or to its latest snapshot once its log start is at least
`start_offset_lag_time_max_ms` old. A live replica is one that fetched within
`quorum.fetch.timeout.ms`. Kafka 4.3.1 has no such rule in its code (its log start follows
its retention policy, kraft's LogStartPolicy.RETENTION), so these pin the project's own
reading, at the two boundaries the simulator's sweep rarely lands on:

- a replica whose last Fetch is exactly the fetch timeout old is still live: the leader keeps
  its log start for it, and moves it one millisecond later;
- a log start exactly the lag time old moves to the latest snapshot although a live replica
  has not replicated it; one millisecond earlier it stays.

Replica 1 of voters {1, 2, 3} leads (elected by hand with voter 2's votes); voter 2 fetches
at the leader's end, voter 3 stays behind at the leader's first record."""

from __future__ import annotations

from hand_driven import HandDriven
from memory_logs import key

from kraft.core.effects import AdvanceLogStartOffset, WriteSnapshot
from kraft.core.events import ClientAppend, CreateSnapshot, Receive, SnapshotWritten
from kraft.core.messages import FetchRequest
from kraft.core.timing import QuorumTiming
from kraft.ids import ClusterId, NodeId, Offset, OffsetAndEpoch

CLUSTER = ClusterId("snapshot-live-replica")
FETCH_TIMEOUT_MS = 2000  # quorum.fetch.timeout.ms, the timing's default
BEHIND = 1  # voter 3's fetch offset: past the LeaderChange record only


class Leader(HandDriven):
    """Replica 1 leading voters {1, 2, 3} with four values committed by voter 2's Fetch and a
    snapshot at its end that voter 3 (fetching from BEHIND) has not replicated."""

    def __init__(self, timing: QuorumTiming) -> None:
        super().__init__(CLUSTER, (1, 2, 3), timing=timing)
        self.elect(2)
        self.epoch = self.replica.view().epoch
        self.step(ClientAppend(self.now, tuple((None, f"v{i}".encode()) for i in range(4)), 1))
        self.tick(self.now)
        assert self.end == 5
        self.fetch(2, self.end)
        assert self.replica.view().high_watermark == self.end
        self.fetch(3, BEHIND)
        self.behind_at = self.now
        [write] = [e for e in self.step(CreateSnapshot(self.now, Offset(self.end)))
                   if isinstance(e, WriteSnapshot)]  # fmt: skip
        self.snapshot: OffsetAndEpoch = write.snapshot_id
        self.step(SnapshotWritten(self.now, self.snapshot))
        assert self.start_offset == 0  # voter 3 is live and behind it

    def fetch(self, src: int, offset: int) -> None:
        """Voter `src` fetches from `offset` (in this epoch), now."""
        req = FetchRequest(CLUSTER, key(src), self.epoch, Offset(offset), self.epoch, Offset(0))
        self.step(Receive(self.now, NodeId(src), req))

    def at(self, t: int, src: int, offset: int) -> None:
        """Run to `t` (ticking at every deadline on the way), then voter `src` fetches."""
        self.run(t)
        self.fetch(src, offset)

    @property
    def start_offset(self) -> int:
        return int(self.replica.view().log_start_offset)

    def moved(self) -> list[AdvanceLogStartOffset]:
        return [e for e in self.last if isinstance(e, AdvanceLogStartOffset)]


def test_a_replica_that_fetched_exactly_the_fetch_timeout_ago_is_still_live() -> None:
    lead = Leader(QuorumTiming())
    t0 = lead.behind_at
    for t in range(t0 + 900, t0 + FETCH_TIMEOUT_MS, 900):  # voter 2 keeps the leader leading
        lead.at(t, 2, lead.end)
    lead.at(t0 + FETCH_TIMEOUT_MS, 2, lead.end)
    assert lead.start_offset == 0 and not lead.moved()  # voter 3 still needs the log
    lead.at(t0 + FETCH_TIMEOUT_MS + 1, 2, lead.end)
    assert lead.moved() == [AdvanceLogStartOffset(lead.snapshot)]
    assert lead.start_offset == lead.snapshot.offset


def test_a_log_start_exactly_the_lag_time_old_moves_to_the_latest_snapshot() -> None:
    lag = 10_000
    lead = Leader(QuorumTiming(start_offset_lag_time_max_ms=lag))  # its log start dates from 0
    assert lead.now < lag - 1000
    t = lead.now
    while t + 900 < lag - 1:  # both voters keep fetching: voter 3 stays live and behind
        t += 900
        lead.at(t, 2, lead.end)
        lead.at(t, 3, BEHIND)
    lead.at(lag - 1, 3, BEHIND)
    assert lead.start_offset == 0 and not lead.moved()
    lead.at(lag, 3, BEHIND)
    assert lead.moved() == [AdvanceLogStartOffset(lead.snapshot)]
    assert lead.start_offset == lead.snapshot.offset
