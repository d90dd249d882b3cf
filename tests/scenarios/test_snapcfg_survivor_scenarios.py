"""Snapshot-transfer, retention and voter-change corners the simulator's sweep does not reach,
each pinned to what Apache Kafka 4.3.1 does (or, where Kafka has no rule, to this project's):

- the voter set in Kafka's refusal texts is printed in the order of a Java HashSet of Kafka's
  ReplicaKey, also for random directory ids (whose Uuid.hashCode uses all 128 bits; the
  simulator's and the other scenarios' directory ids are small numbers, for which a hash that
  drops or shifts the high bits orders them the same);
- a leader that removed itself resigns in the step its HWM passes the Voters record that left
  it out (Kafka's RemoveVoterHandler.highWatermarkUpdated: `highWatermark > lastOffset`), not
  when the HWM only reaches that record's offset;
- a snapshot of epoch 0 is fetched like any other (Kafka's handleFetchResponse refuses only a
  negative epoch or end offset);
- a FetchSnapshot chunk that cannot belong to the snapshot (no bytes, or a size other than the
  one the transfer was told) sends the fetcher back to Fetch after quorum.retry.backoff.ms,
  neither at once nor later (this project's rule; the retry-timing checkers' FetchRetryExact);
- a SnapshotValidated answer that arrives while the transfer is still fetching chunks (one
  about an abandoned transfer of the same snapshot, which the node's store and the simulator
  drop by the `.part`'s generation; the core does not rely on its driver for that) changes
  nothing: nothing is installed, the transfer goes on;
- under Kafka's retention policy a follower's log start never passes its leader's, whatever
  its own retention asks for (KIP-630: a follower's log start moves up to the leader's).
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from scenario_harness import (
    CLUSTER,
    Cluster,
    DynamicCluster,
    Node,
    Recording,
    RetentionCluster,
    committed,
    controller_endpoints,
    elect,
    snapshot_everywhere,
)

from kraft.control_records import VoterEntry, VotersRecord
from kraft.core.effects import (
    HighWatermarkMoved,
    InstallSnapshot,
    Send,
    StateChanged,
)
from kraft.core.events import (
    CreateSnapshot,
    DeleteBeforeSnapshot,
    Receive,
    SnapshotValidated,
)
from kraft.core.log_metadata import LogState
from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    FetchRequest,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Message,
    RemoveVoterRequest,
    RemoveVoterResponse,
    Request,
)
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.errors import ErrorCode
from kraft.ids import DirectoryId, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.records import encode_batch

S = ReplicaState
ADMIN = NodeId(-1)  # an admin client has no node id
RETRY_BACKOFF_MS = 20  # quorum.retry.backoff.ms, the timing's default

# ------------------------------------------------------------------ Kafka's HashSet order

RANDOM_KEYS = {
    1: ReplicaKey(NodeId(1), DirectoryId(uuid.UUID("f4cf5a45-5244-f28f-ceaa-daf6eabfaeac"))),
    2: ReplicaKey(NodeId(2), DirectoryId(uuid.UUID("ec3f2989-9c3f-c88d-32b8-46781f66eb46"))),
    3: ReplicaKey(NodeId(3), DirectoryId(uuid.UUID("6c86dcc0-aa09-1faa-e11d-6be21739f718"))),
}
# Java 17 with Kafka 4.3.1's jars: tests/interop/java/ReplicaKeySetOrder.java given the line
# "1:f4cf5a45-... 2:ec3f2989-... 3:6c86dcc0-..." (a HashSet<ReplicaKey> filled in id order)
# printed this. A Uuid hash of (h >> 31) ^ h instead of Kafka's (h >> 32) ^ h prints 3, 1, 2.
JAVA_SET = (
    "[ReplicaKey(id=3, directoryId=bIbcwKoJH6rhHWviFzn3GA),"
    " ReplicaKey(id=2, directoryId=7D8piZw_yI0yuEZ4H2brRg),"
    " ReplicaKey(id=1, directoryId=9M9aRVJE8o_Oqtr26r-urA)]"
)


class RandomKeyCluster(Cluster):
    """A dynamic quorum {1, 2, 3} (bootstrap Voters record at offset -1, kraft.version 1)
    whose voters' directory ids are RANDOM_KEYS'."""

    def boot_state(self, n: Node) -> LogState:
        me = RANDOM_KEYS[int(n.config.node.id)]
        n.config = replace(n.config, node=me, voters=())
        entries = tuple(
            VoterEntry(i, k.directory_id, controller_endpoints(i), 0, 1)
            for i, k in sorted(RANDOM_KEYS.items())
        )
        bootstrap = voter_set_of(VotersRecord(0, entries))
        return replace(super().boot_state(n), voter_history=((Offset(-1), bootstrap),))


def test_refusal_texts_print_random_directory_ids_in_javas_hash_set_order() -> None:
    c = RandomKeyCluster(3, seed=37)
    lead = elect(c)
    committed(c, lead, 1)  # the epoch's records committed: changes are considered
    other = RANDOM_KEYS[2 if lead != 2 else 3]

    def ask(request: AddVoterRequest | RemoveVoterRequest) -> object:
        effects = c.r(lead).step(Receive(c.now, ADMIN, request, reply_to=5))
        [answer] = [e.message for e in effects if isinstance(e, Send) and e.dst == ADMIN]
        return answer

    added = ask(AddVoterRequest(CLUSTER, other, controller_endpoints(int(other.id))))
    assert added == AddVoterResponse(
        ErrorCode.DUPLICATE_VOTER,
        f"The voter id for {other.kafka_text()} is already part of the set of voters {JAVA_SET}.",
    )
    stranger = ReplicaKey(NodeId(9), DirectoryId(uuid.UUID(int=0x9)))
    removed = ask(RemoveVoterRequest(CLUSTER, stranger))
    assert removed == RemoveVoterResponse(
        ErrorCode.VOTER_NOT_FOUND,
        f"Cannot remove voter {stranger.kafka_text()} from the set of voters {JAVA_SET}",
    )


# ------------------------------------------------------------------ a removed leader resigns


class DynamicRecording(Recording, DynamicCluster):
    """A dynamic quorum that remembers every node's effects and messages (the admin client's
    answers are dropped: not this test's subject)."""

    def send(self, src: int, dst: int, msg: Message, answering: Request | None) -> None:
        if dst != ADMIN:
            super().send(src, dst, msg, answering)


def test_a_removed_leader_resigns_once_its_hwm_passes_the_voters_record_not_before() -> None:
    """Voters {1, 2, 3}; the leader, cut off from both followers, appends a record D and then
    removes itself (the Voters record V right after D). Healed, the followers fetch one batch
    per Fetch (fetch_max_bytes 1): the HWM first rises to V's offset (D committed by the new
    set {2, 3}, V not yet), then past it. The leader leads through the first rise and resigns
    in the step of the second."""
    c = DynamicRecording(3, seed=11, fetch_max_bytes=1)
    lead = elect(c)
    committed(c, lead, 2)
    c.isolate(lead)
    c.append(lead, b"D")
    asked = RemoveVoterRequest(CLUSTER, c.nodes[lead].config.node)
    c.step(lead, Receive(c.now, ADMIN, asked, reply_to=7))
    voters_offset = c.view(lead).end_offset - 1
    assert c.view(lead).voters == tuple(i for i in (1, 2, 3) if i != lead)
    c.heal()
    c.run_until(lambda: c.view(lead).state is not S.LEADER, limit=3000, step_ms=1)
    moves = [
        (t, e.high_watermark)
        for t, e in c.effects[lead]
        if isinstance(e, HighWatermarkMoved) and e.high_watermark >= voters_offset
    ]
    [resigned_at] = [
        t for t, e in c.effects[lead] if isinstance(e, StateChanged) and e.new is S.RESIGNED
    ]
    assert moves[0][1] == voters_offset, moves  # the HWM did stop at V's offset first
    assert [hwm for t, hwm in moves if t <= resigned_at] == [voters_offset, voters_offset + 1]
    assert moves[1][0] == resigned_at  # resigned in the step the HWM passed V


# ------------------------------------------------------------------ snapshot transfers


class EpochZeroCluster(Cluster):
    """Voters 1 and 2 start with five records of epoch 0 (offsets 0-4), 3 with an empty log."""

    def boot_state(self, n: Node) -> LogState:
        if int(n.config.node.id) != 3 and n.log.end_offset == 0:
            n.log.append_as_follower(
                encode_batch(0, 0, [f"e0o{i}".encode() for i in range(5)], timestamp_ms=0)
            )
            n.log.flush()
        return super().boot_state(n)


def _trim(c: Cluster, lead: int, behind: int, at: int) -> OffsetAndEpoch:
    """`behind` is cut off past a fetch timeout (no longer live); the leader snapshots at `at`
    and its log start moves there."""
    c.isolate(behind)
    c.run(c.now + 3000)
    c.step(lead, CreateSnapshot(c.now, at))
    c.run_until(lambda: c.view(lead).log_start_offset == at)
    snaps = c.nodes[lead].snaps
    assert snaps is not None
    [sid] = [s for s in snaps.complete if s.offset == at]
    return sid


def test_a_snapshot_of_epoch_0_is_fetched_and_installed() -> None:
    c = EpochZeroCluster(3, seed=41, snapshots=True)
    c.isolate(3)  # it never gets a record from its log: it needs the snapshot
    c.run_until(lambda: c.leader() in (1, 2))
    lead = c.leader()
    assert lead is not None
    committed(c, lead, 1)
    sid = _trim(c, lead, 3, 5)
    assert sid == OffsetAndEpoch(0, 5)  # type: ignore[arg-type]
    c.heal()
    c.run_until(lambda: c.nodes[3].log.start_offset == 5, limit=2000)
    assert c.nodes[3].snaps is not None and sid in c.nodes[3].snaps.complete


def _mid_transfer(c: Recording, fetcher: int) -> tuple[int, FetchSnapshotRequest]:
    """Run until `fetcher` asked a chunk past the first; the leader and that request."""
    lead = elect(c)
    c.isolate(fetcher)
    end = committed(c, lead, 12)
    _trim(c, lead, fetcher, end)
    c.heal()
    c.run_until(
        lambda: any(src == fetcher and isinstance(m, FetchSnapshotRequest) and m.position > 0
                    for _, src, _, m in c.sent)
    )  # fmt: skip
    [*_, (_, _, _, last)] = [s for s in c.sent if s[1] == fetcher]
    assert isinstance(last, FetchSnapshotRequest)
    assert c.nodes[fetcher].log.start_offset == 0  # nothing installed yet
    return lead, last


def _next_request_after_a_bad_chunk(bad: str) -> tuple[int, object]:
    """Mid-transfer, the fetcher gets a chunk answer of its leader for the snapshot and
    position it asked that cannot belong to the snapshot (`bad`); how long after it, and
    what, the fetcher sends next."""
    c = Recording(3, observers=1, seed=29, snapshots=True, fetch_max_bytes=8)
    lead, asked = _mid_transfer(c, 4)
    c.partition(4, lead)  # the real chunks stop; this answer comes instead
    [size, *_] = [m.size for _, _, _, m in c.sent if isinstance(m, FetchSnapshotResponse)]
    answer = FetchSnapshotResponse(
        ErrorCode.NONE,
        NodeId(lead),
        c.view(lead).epoch,
        asked.snapshot_id,
        size=10**6 if bad == "other size" else size,  # an empty chunk comes with the true size
        position=asked.position,
        chunk=b"" if bad == "empty" else b"x" * 8,
    )
    at = c.now
    effects = c.step(4, Receive(at, NodeId(lead), answer))
    assert not any(isinstance(e, Send) for e in effects), bad
    c.heal()
    c.run_until(lambda: any(t > at and s == 4 for t, s, _, _ in c.sent), step_ms=1)
    t, _, _, first = next(m for m in c.sent if m[0] > at and m[1] == 4)
    return t - at, first


def test_a_chunk_not_of_the_snapshot_sends_the_fetcher_to_fetch_after_the_retry_backoff() -> None:
    for bad in ("empty", "other size"):
        waited, first = _next_request_after_a_bad_chunk(bad)
        assert isinstance(first, FetchRequest), bad
        assert waited == RETRY_BACKOFF_MS, (bad, waited)


def test_a_validation_answer_while_chunks_are_still_fetched_changes_nothing() -> None:
    c = Recording(3, observers=1, seed=29, snapshots=True, fetch_max_bytes=8)
    _, asked = _mid_transfer(c, 4)
    before = c.view(4)
    stale = SnapshotValidated(c.now, asked.snapshot_id, True, reason="")
    effects = c.step(4, stale)
    assert not any(isinstance(e, InstallSnapshot) for e in effects)
    assert c.view(4).log_start_offset == before.log_start_offset
    c.run_until(lambda: c.nodes[4].log.start_offset == asked.snapshot_id.offset, limit=5000)


# ------------------------------------------------------------------ retention


def test_under_retention_a_followers_log_start_never_passes_the_leaders() -> None:
    """Every replica snapshots at e1 and later at e2; the leader's retention asks for e1, the
    followers' for e2: the leader's log start moves to e1, and so do the followers', not
    to e2."""
    c = RetentionCluster(3, seed=23, snapshots=True)
    lead = elect(c)
    e1 = snapshot_everywhere(c, lead, 5)
    e2 = snapshot_everywhere(c, lead, 5)
    followers = [i for i in c.nodes if i != lead]
    for i in followers:
        c.step(i, DeleteBeforeSnapshot(c.now, e2))
    c.step(lead, DeleteBeforeSnapshot(c.now, e1))
    c.run_until(lambda: all(c.view(i).log_start_offset == e1.offset for i in c.nodes))
    c.run(c.now + 1000)
    assert [c.view(i).log_start_offset for i in followers] == [e1.offset, e1.offset]


def test_under_retention_a_follower_heeds_a_new_leaders_log_start_of_0() -> None:
    """A leader that moved its log start to e1 is followed by one that never moved its (0):
    a follower that heard e1 from the first and is then asked by its retention to move to e1
    stays at 0, the log start the new leader's Fetch answers give (0 is a log start like any
    other, not "unknown")."""
    c = RetentionCluster(3, seed=23, snapshots=True)
    first = elect(c)
    e1 = snapshot_everywhere(c, first, 5)
    c.step(first, DeleteBeforeSnapshot(c.now, e1))
    c.run(c.now + 1000)  # the followers hear log start e1 in the first leader's answers
    assert c.view(first).log_start_offset == e1.offset
    c.crash(first)
    second = elect(c)
    assert second != first and c.view(second).log_start_offset == 0
    [other] = [i for i in c.nodes if i not in (first, second)]
    c.run(c.now + 1000)  # it fetches from the second leader
    c.step(other, DeleteBeforeSnapshot(c.now, e1))
    c.run(c.now + 1000)
    assert c.view(other).log_start_offset == 0
