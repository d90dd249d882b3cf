"""KIP-630 corners the simulator's sweep rarely draws, on a small cluster:

- a replica built without snapshots (no SnapshotSource) whose leader's log starts at a snapshot
  says so once per snapshot id (SnapshotRequired), however often it fetches again;
- an observer whose leader went silent in the middle of a snapshot transfer goes on with the
  transfer as soon as the leader answers one of its Fetches again;
- check-quorum counts the FetchSnapshot requests of voters, and not those of observers: a
  leader cut off from its voters resigns although an observer keeps fetching chunks from it,
  and a leader whose voters only fetch snapshot chunks keeps leading;
- FetchSnapshot for a position past the snapshot, or for a snapshot the leader lacks, is
  answered with its error at once, and a fetcher so answered goes back to Fetch at once;
- a SnapshotWritten of the snapshot the log already starts at (a late or repeated report) is
  no new CreateSnapshot: the spec's CreateSnapshot takes an offset past the log start;
- under Kafka's retention policy (the node's, not the simulator's), followers move their log
  start to the snapshot their retention asks for once the leader's log start is there.
"""

from __future__ import annotations

from memory_logs import key
from scenario_harness import Cluster, RetentionCluster, committed, elect, snapshot_everywhere

from kraft.core.effects import ActionTaken, Effect, Send, SnapshotRequired
from kraft.core.events import CreateSnapshot, DeleteBeforeSnapshot, Event, Receive, SnapshotWritten
from kraft.core.messages import (
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch
from kraft.storage.memory_log import MemoryLog

S = ReplicaState
CHECK_QUORUM_MS = 3000  # 1.5 x quorum.fetch.timeout.ms (2000), Kafka's factor
FETCH_MAX_WAIT_MS = 500  # quorum.fetch.max.wait.ms: a Fetch held at the cut is answered later


class Recording(Cluster):
    """A cluster that remembers every node's effects."""

    def __init__(self, *args: object, **kw: object) -> None:
        self.effects: dict[int, list[Effect]] = {}
        super().__init__(*args, **kw)  # type: ignore[arg-type]

    def step(self, i: int, ev: Event) -> list[Effect]:
        out = super().step(i, ev)
        self.effects.setdefault(i, []).extend(out)
        return out


def trimmed_leader(c: Cluster, behind: int, records: int = 12) -> tuple[int, OffsetAndEpoch]:
    """Elect, cut `behind` off, commit, wait past a fetch timeout (it is no longer live), then
    the leader snapshots at its HWM and its log start moves there."""
    lead = elect(c)
    assert lead != behind
    c.isolate(behind)
    committed(c, lead, records)
    c.run(c.now + 3000)
    hwm = c.view(lead).high_watermark
    assert hwm is not None
    c.step(lead, CreateSnapshot(c.now, hwm))
    c.run_until(lambda: c.view(lead).log_start_offset == hwm)
    snaps = c.nodes[lead].snaps
    assert snaps is not None
    [sid] = [s for s in snaps.complete if s.offset == hwm]
    return lead, sid


def test_a_replica_without_snapshots_reports_the_leaders_snapshot_once() -> None:
    c = Recording(3, observers=1, seed=7, snapshots=True)
    lead, sid = trimmed_leader(c, behind=4)
    # The observer comes back as a replica built without snapshots, its disk empty.
    c.crash(4)
    c.nodes[4].snaps = None
    c.nodes[4].log = MemoryLog()
    c.start(4)
    c.heal()
    c.run(c.now + 6000)
    answers = [
        m
        for src, dst, m in c.delivered
        if dst == 4 and src == lead and isinstance(m, FetchResponse) and m.snapshot_id == sid
    ]
    assert len(answers) >= 3  # it kept fetching, slowly
    required = [e for e in c.effects[4] if isinstance(e, SnapshotRequired)]
    assert required == [SnapshotRequired(NodeId(lead), sid)]
    assert c.view(4).end_offset == 0  # nothing could be appended


def test_an_observer_resumes_its_transfer_once_its_silent_leader_answers() -> None:
    c = Cluster(3, observers=1, seed=11, snapshots=True, fetch_max_bytes=24)
    lead, sid = trimmed_leader(c, behind=4)
    c.heal()
    c.run_until(
        lambda: any(src == 4 and isinstance(m, FetchSnapshotRequest) and m.position > 0
                    for src, _, m in c.delivered)
    )  # fmt: skip
    assert c.nodes[4].log.start_offset == 0  # mid-transfer
    # The leader falls silent to the observer (the voters still hear it), for longer than the
    # observer's fetch timeout: it asks the leader and the voters in turn.
    c.partition(4, lead)
    c.run(c.now + 4000)
    assert c.view(4).state is S.FOLLOWER and c.view(4).leader_id == lead
    assert c.nodes[4].log.start_offset == 0
    c.heal()
    healed = c.now
    c.run_until(lambda: c.nodes[4].log.start_offset == sid.offset, limit=10_000)
    # Resumed on the leader's first answer, not after another fetch timeout.
    assert c.now - healed < 1000


def _fetch_snapshot_from(c: Cluster, lead: int, src: int, sid: OffsetAndEpoch) -> None:
    epoch = c.view(lead).epoch
    req = FetchSnapshotRequest(
        c.nodes[lead].config.cluster_id, key(src), epoch, sid, 0, max_bytes=1 << 20
    )
    c.step(lead, Receive(c.now, NodeId(src), req))


def test_check_quorum_does_not_count_an_observers_snapshot_fetches() -> None:
    c = Cluster(3, observers=1, seed=13, snapshots=True)
    lead, sid = trimmed_leader(c, behind=4)
    c.heal()
    voters = [v for v in (1, 2, 3) if v != lead]
    for v in voters:
        c.partition(lead, v)
    c.partition(lead, 4)  # the observer's chunks below come by hand, one every 100 ms
    cut_at = c.now
    while c.view(lead).state is S.LEADER and c.now < cut_at + 2 * CHECK_QUORUM_MS:
        _fetch_snapshot_from(c, lead, 4, sid)
        c.run(c.now + 100)
    assert c.view(lead).state is not S.LEADER
    # At the check-quorum timeout after the last voter's Fetch (one held at the cut counts
    # when it is answered).
    assert c.now <= cut_at + FETCH_MAX_WAIT_MS + CHECK_QUORUM_MS + 100


def test_check_quorum_counts_a_voters_snapshot_fetches() -> None:
    c = Cluster(3, observers=1, seed=17, snapshots=True)
    lead, sid = trimmed_leader(c, behind=4)
    c.heal()
    voter = next(v for v in (1, 2, 3) if v != lead)
    c.isolate(lead)  # only the voter's chunk requests below reach it
    cut_at = c.now
    while c.now < cut_at + 2 * CHECK_QUORUM_MS:
        _fetch_snapshot_from(c, lead, voter, sid)
        c.run(c.now + 100)
    # One voter besides itself is a majority of three: the timer restarted each time.
    assert c.view(lead).state is S.LEADER


def test_a_chunk_request_past_the_snapshot_or_for_a_missing_one_is_answered_with_an_error() -> None:
    """HandleFetchSnapshotRequest answers at once: POSITION_OUT_OF_RANGE for a position at or
    past the snapshot's size, SNAPSHOT_NOT_FOUND for a snapshot it does not hold."""
    c = Cluster(3, observers=1, seed=19, snapshots=True)
    lead, sid = trimmed_leader(c, behind=4)
    snaps = c.nodes[lead].snaps
    assert snaps is not None
    size = len(snaps.complete[sid])
    cluster = c.nodes[lead].config.cluster_id
    epoch = c.view(lead).epoch
    missing = OffsetAndEpoch(sid.epoch, Offset(sid.offset - 1))
    for snapshot_id, position, error in (
        (sid, size, ErrorCode.POSITION_OUT_OF_RANGE),
        (sid, size + 100, ErrorCode.POSITION_OUT_OF_RANGE),
        (missing, 0, ErrorCode.SNAPSHOT_NOT_FOUND),
    ):
        req = FetchSnapshotRequest(cluster, key(4), epoch, snapshot_id, position, max_bytes=1 << 20)
        effects = c.step(lead, Receive(c.now, NodeId(4), req))
        answers = [
            e.message
            for e in effects
            if isinstance(e, Send) and e.dst == 4 and isinstance(e.message, FetchSnapshotResponse)
        ]
        assert [a.error for a in answers] == [error], (snapshot_id, position)


def test_under_retention_followers_move_their_log_start_behind_the_leaders() -> None:
    """KIP-630 under Kafka's retention: each replica's retention asks for the log start at a
    snapshot it holds; a follower moves there only once the leader's log start (from its
    Fetch answers) has, and the leader once every live replica has the snapshot."""
    c = RetentionCluster(3, seed=23, snapshots=True)
    lead = elect(c)
    sid = snapshot_everywhere(c, lead, 10)
    followers = [i for i in c.nodes if i != lead]
    c.run(c.now + 1000)
    assert all(c.view(i).log_start_offset == 0 for i in c.nodes)  # nothing asked yet
    for i in followers:  # their retention asks first: the leader's log start is still 0
        c.step(i, DeleteBeforeSnapshot(c.now, sid))
    c.run(c.now + 1000)
    assert all(c.view(i).log_start_offset == 0 for i in followers)
    c.step(lead, DeleteBeforeSnapshot(c.now, sid))
    c.run_until(lambda: all(c.view(i).log_start_offset == sid.offset for i in c.nodes), limit=5000)


def _until_mid_transfer(c: Cluster, fetcher: int) -> None:
    c.run_until(
        lambda: any(src == fetcher and isinstance(m, FetchSnapshotRequest) and m.position > 0
                    for src, _, m in c.delivered)
    )  # fmt: skip
    assert c.nodes[fetcher].log.start_offset == 0  # nothing installed yet


def test_a_snapshot_gone_from_the_leader_mid_transfer_sends_the_fetcher_back_to_fetch_at_once() -> (
    None
):
    """The leader no longer holds the snapshot being fetched (SNAPSHOT_NOT_FOUND, or a position
    past its end): the fetcher drops the transfer and asks the leader with Fetch at once, as
    Kafka does, for the snapshot it holds now."""
    for error in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
        c = Cluster(3, observers=1, seed=29, snapshots=True, fetch_max_bytes=8)
        lead, _ = trimmed_leader(c, behind=4)
        c.heal()
        _until_mid_transfer(c, 4)
        c.partition(4, lead)  # the real chunks stop; this answer comes instead
        gone = FetchSnapshotResponse(
            error,
            NodeId(lead),
            c.view(lead).epoch,
            OffsetAndEpoch(Epoch(-1), Offset(-1)),
            size=0,
            position=0,
        )
        effects = c.step(4, Receive(c.now, NodeId(lead), gone))
        fetches = [
            e.message
            for e in effects
            if isinstance(e, Send) and e.dst == lead and isinstance(e.message, FetchRequest)
        ]
        assert len(fetches) == 1, error
        assert fetches[0].fetch_offset == c.nodes[4].log.end_offset  # from its own log end


def test_a_snapshot_written_at_the_log_start_is_no_create_snapshot() -> None:
    c = Recording(3, observers=1, seed=7, snapshots=True)
    lead, sid = trimmed_leader(c, behind=4)
    before = c.view(lead)
    effects = c.r(lead).step(SnapshotWritten(c.now, sid))
    assert ActionTaken(Action.CREATE_SNAPSHOT) not in effects
    assert c.view(lead) == before
