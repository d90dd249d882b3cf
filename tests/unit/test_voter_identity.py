"""KIP-853 identity: a voter is (replica id, directory id). A replica whose directory id is not
the voter's (its disk was wiped and reformatted) is an observer, never that voter: it grants no
vote as that voter, and the leader counts its Fetches neither toward the high watermark nor
toward check-quorum. Voter sets come from Voters records in the log, take effect when appended
and are undone when truncated (KIP-856). Kafka's rules: VoterSet.VoterNode.isVoter,
KafkaRaftClient.isValidVoterKey, LeaderState.getOrCreateReplicaState."""

from __future__ import annotations

import uuid

import pytest
from replica_harness import CLUSTER, Harness, build_log, key, sent, stand

from kraft.control_records import (
    Endpoint,
    KRaftVersionRecord,
    VoterEntry,
    VotersRecord,
    decode_control_batch,
    encode_control_batch,
)
from kraft.core.effects import ElectionState
from kraft.core.events import SnapshotValidated
from kraft.core.log_metadata import LogMetadata, LogState
from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest, VoteResponse
from kraft.core.vocabulary import ReplicaState
from kraft.core.voter_records import voter_set_of, voters_record_at
from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import DirectoryId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey
from kraft.storage.bootstrap import stated_voters

S = ReplicaState
# Node 2 after its disk was wiped and reformatted: same id, a new directory id.
WIPED = ReplicaKey(NodeId(2), DirectoryId(uuid.UUID(int=0xD15C)))


def test_a_voter_known_with_a_directory_id_is_only_that_directory() -> None:
    dynamic = VoterSet((key(1), key(2), key(3)))
    assert dynamic.contains(key(2))
    assert not dynamic.contains(WIPED)
    # A replica naming no directory id is not a voter known with one (Kafka's isVoter).
    assert not dynamic.contains(ReplicaKey(NodeId(2)))
    static = VoterSet((ReplicaKey(NodeId(1)), ReplicaKey(NodeId(2)), ReplicaKey(NodeId(3))))
    assert static.contains(WIPED) and static.contains(key(2))
    assert not static.contains(ReplicaKey(NodeId(4)))


def test_a_wiped_replica_is_an_observer_and_refuses_votes_meant_for_the_voter() -> None:
    h = Harness(node=2, voters=(1, 2, 3), node_key=WIPED)
    assert not h.replica.is_voter
    # Node 3 stands and asks voter 2 (as it knows it: key(2)) for its vote.
    request = VoteRequest(CLUSTER, key(3), Epoch(2), Epoch(0), Offset(0), voter=key(2))
    [(dst, answer)] = sent(h.recv(3, request), VoteResponse)
    assert dst == 3
    assert answer.error is ErrorCode.INVALID_VOTER_KEY and not answer.vote_granted
    assert h.view.voted_for is None


def test_the_voter_itself_grants_the_same_request() -> None:
    h = _replica(key(2))
    request = VoteRequest(CLUSTER, key(3), Epoch(2), Epoch(0), Offset(0), voter=key(2))
    [(_, answer)] = sent(h.recv(3, request), VoteResponse)
    assert answer.error is ErrorCode.NONE and answer.vote_granted


def test_the_leader_counts_a_wiped_replica_neither_for_the_hwm_nor_as_the_voter() -> None:
    h = Harness(node=1, voters=(1, 2, 3), log=build_log([(1, 3)]))
    _elect(h)
    end = int(h.view.end_offset)
    epoch = int(h.view.epoch)
    # The wiped replica claims to have everything: the HWM must not move on its word.
    h.recv(2, _fetch(WIPED, epoch, end, epoch))
    assert h.view.high_watermark is None or h.view.high_watermark < end
    description = h.replica.describe_quorum()
    assert description is not None
    assert WIPED in [o.replica for o in description.observers]
    assert [v.replica for v in description.voters if v.replica.id == 2] == [key(2)]
    # A Fetch naming no directory id is no voter's either.
    h.recv(2, _fetch(ReplicaKey(NodeId(2)), epoch, end, epoch))
    assert h.view.high_watermark is None or h.view.high_watermark < end
    # The real voter 3 makes a majority with the leader.
    h.recv(3, _fetch(key(3), epoch, end, epoch))
    assert h.view.high_watermark == end


def test_voters_records_set_the_voter_set_when_appended_and_truncation_reverts_it() -> None:
    h = Harness(node=3, voters=(1, 2, 3), election=ElectionState(Epoch(1), leader_id=NodeId(1)))
    assert h.view.state is S.FOLLOWER
    record = _voters_record((1, key(1).directory_id), (3, key(3).directory_id), (4, _dir(4)))
    batch = encode_control_batch(0, 1, record, timestamp_ms=0)
    h.recv(
        1, FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(1), Offset(-1), Offset(0), records=batch)
    )
    assert h.view.end_offset == 1
    assert h.replica._voters.ids == (NodeId(1), NodeId(3), NodeId(4))
    assert h.replica.is_voter
    # The leader's log does not have that record (it diverges at 0): truncated, and undone.
    h.recv(
        1,
        FetchResponse(
            ErrorCode.NONE,
            NodeId(1),
            Epoch(1),
            Offset(-1),
            Offset(0),
            diverging_epoch=_oe(0, 0),
        ),
    )
    assert h.view.end_offset == 0
    assert h.replica._voters.ids == (NodeId(1), NodeId(2), NodeId(3))


def test_log_state_voter_history_replaces_the_static_set_and_keeps_order() -> None:
    static = VoterSet((ReplicaKey(NodeId(1)),))
    boot = (key(1), key(2), key(3))
    later = (key(1), key(2))
    meta = LogMetadata(
        LogState(
            Offset(0),
            Offset(10),
            voter_history=((Offset(-1), VoterSet(boot)), (Offset(5), VoterSet(later))),
        ),
        static,
    )
    assert meta.voters_at(Offset(0)) == VoterSet(boot)
    assert meta.voters == VoterSet(later)
    meta.truncate(Offset(5))
    assert meta.voters == VoterSet(boot)


# --------------------------------------------------------------------------- helpers


def _dir(n: int) -> DirectoryId:
    return DirectoryId(uuid.UUID(int=0xABC0 + n))


def _oe(epoch: int, offset: int) -> OffsetAndEpoch:
    return OffsetAndEpoch(Epoch(epoch), Offset(offset))


def _voters_record(*voters: tuple[int, DirectoryId]) -> VotersRecord:
    return VotersRecord(
        0,
        tuple(
            VoterEntry(n, d, (Endpoint("CONTROLLER", "127.0.0.1", 9000 + n),), 0, 1)
            for n, d in voters
        ),
    )


def _replica(me: ReplicaKey) -> Harness:
    return Harness(node=int(me.id), voters=(1, 2, 3), node_key=me)


def _fetch(replica: ReplicaKey, epoch: int, offset: int, last_epoch: int) -> FetchRequest:
    return FetchRequest(
        CLUSTER, replica, Epoch(epoch), Offset(offset), Epoch(last_epoch), Offset(0)
    )


def _elect(h: Harness) -> None:
    stand(h)
    for v in (2, 3):
        if h.view.state is S.CANDIDATE:
            h.recv(v, VoteResponse(ErrorCode.NONE, NodeId(-1), h.view.epoch, True))
    assert h.view.state is S.LEADER


def _bootstrapped(node: int, node_key: ReplicaKey | None = None) -> Harness:
    """A replica of a dynamic quorum: its voter set {1, 2, 3} (with directory ids) comes from
    the bootstrap checkpoint, at offset -1; the static configuration names no voter."""
    record = _voters_record(*((n, key(n).directory_id) for n in (1, 2, 3)))
    stated = ((Offset(-1), voter_set_of(record)),)
    return Harness(node=node, voters=(), node_key=node_key, voter_history=stated)


def test_a_leader_writes_the_bootstrap_voter_set_into_the_log_at_its_epoch_start() -> None:
    h = _bootstrapped(1)
    assert h.replica.is_voter
    _elect(h)
    _, records = decode_control_batch(h.log.read(Offset(0), 1 << 20).data)
    kinds = [type(r).__name__ for r in records]
    assert kinds == ["LeaderChangeMessage", "KRaftVersionRecord", "VotersRecord"]
    assert records[1] == KRaftVersionRecord(0, 1)
    assert records[2] == h.replica._voters.record
    assert h.replica._log.voters_offset == 2
    # The next leader finds the voter set in the log: LeaderChange alone.
    history = tuple((o, voter_set_of(v)) for o, v in stated_voters(None, h.log).history)
    h2 = Harness(
        node=1, voters=(), log=h.log, election=ElectionState(Epoch(2)), voter_history=history
    )
    end = int(h.log.end_offset)
    _elect(h2)
    _, again = decode_control_batch(h2.log.read(Offset(end), 1 << 20).data)
    assert h2.replica._log.voters_offset == 2
    assert [type(r).__name__ for r in again] == ["LeaderChangeMessage"]


def test_a_wiped_replica_learns_from_the_leaders_log_that_it_is_not_the_voter() -> None:
    """Reformatted without a bootstrap checkpoint, with the static voters {1, 2, 3} (ids only)
    configured, it believes it is voter 2 until it fetches the voter set the leader wrote."""
    h = Harness(
        node=2,
        voters=(),
        node_key=WIPED,
        election=ElectionState(Epoch(1), leader_id=NodeId(1)),
        static_voters=(ReplicaKey(NodeId(1)), ReplicaKey(NodeId(2)), ReplicaKey(NodeId(3))),
    )
    assert h.replica.is_voter
    leader = _bootstrapped(1)
    _elect(leader)
    batch = bytes(leader.log.read(Offset(0), 1 << 20).data)
    epoch = leader.view.epoch
    h.recv(1, FetchResponse(ErrorCode.NONE, NodeId(1), epoch, Offset(-1), Offset(0), records=batch))
    assert h.view.end_offset == 1 + 2
    assert not h.replica.is_voter
    assert h.replica._voters.ids == (NodeId(1), NodeId(2), NodeId(3))


def test_an_installed_snapshot_brings_its_voter_set_and_record() -> None:
    """A follower that installs the leader's snapshot takes the voter set of its Voters
    record (KIP-853), with the record, so that its own later snapshots carry it too."""
    from test_snapshots_follower import SNAP, fetch_all, follower, start_transfer

    h = follower()
    fetch_all(h, start_transfer(h))
    record = _voters_record((1, key(1).directory_id), (2, key(2).directory_id), (5, _dir(5)))
    keys = tuple(ReplicaKey(NodeId(v.voter_id), v.voter_directory_id) for v in record.voters)
    h.step(SnapshotValidated(h.now, SNAP, True, keys, voters_record=record))
    assert h.view.log_start_offset == SNAP.offset
    assert h.replica._voters.ids == (NodeId(1), NodeId(2), NodeId(5))
    assert voters_record_at(h.replica, SNAP.offset) == record


def test_a_corrupt_voters_record_is_refused_and_unknown_control_records_are_skipped() -> None:
    import struct

    from kraft.control_records import LeaderChangeMessage
    from kraft.core.voter_records import voter_sets_in
    from kraft.encoding import varint_bytes
    from kraft.records import CorruptRecordError, assemble_batch, record_body

    def control_batch(kind: int, value: bytes) -> bytes:
        body = record_body(0, struct.pack(">hh", 0, kind), value, ())
        return assemble_batch(
            0, 1, [b"", varint_bytes(len(body)), body], attributes=0x20, count=1, timestamp_ms=0
        )

    assert voter_sets_in(control_batch(42, b"\x00\x00\x00")) == []  # an unknown type
    leader_change = encode_control_batch(
        0, 1, LeaderChangeMessage(0, 1, (1,), (1,)), timestamp_ms=0
    )
    assert voter_sets_in(leader_change) == []
    with pytest.raises(CorruptRecordError):
        voter_sets_in(control_batch(6, b"\x00\x00\x05"))  # a Voters record cut short
    # A follower refuses such a batch: nothing appended, its voter set unchanged.
    h = Harness(node=3, voters=(1, 2, 3), election=ElectionState(Epoch(1), leader_id=NodeId(1)))
    bad = control_batch(6, b"\x00\x00\x05")
    h.recv(
        1, FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(1), Offset(-1), Offset(0), records=bad)
    )
    assert h.view.end_offset == 0 and h.replica._voters.ids == (NodeId(1), NodeId(2), NodeId(3))


def test_a_leader_counts_the_voters_of_its_log_not_of_its_configuration() -> None:
    """The configuration names {1, 2, 3}; the log's Voters record (appended by an earlier
    leader, perhaps uncommitted) says {1, 2}: in force once appended (KIP-856), so the new
    leader needs voter 2 for its HWM and voter 3's Fetches count for nothing."""
    from kraft.storage.memory_log import MemoryLog

    log = MemoryLog()
    record = _voters_record((1, key(1).directory_id), (2, key(2).directory_id))
    log.append_as_follower(encode_control_batch(0, 1, record, timestamp_ms=0))
    log.flush()
    history = tuple((o, voter_set_of(v)) for o, v in stated_voters(None, log).history)
    h = Harness(node=1, voters=(1, 2, 3), log=log, voter_history=history)
    assert h.view.voters == (1, 2)
    _elect(h)
    end, epoch = int(h.view.end_offset), int(h.view.epoch)
    h.recv(3, _fetch(key(3), epoch, end, epoch))
    assert h.view.high_watermark is None
    description = h.replica.describe_quorum()
    assert description is not None
    assert [v.replica for v in description.voters] == [key(1), key(2)]
    assert key(3) in [o.replica for o in description.observers]
    h.recv(2, _fetch(key(2), epoch, end, epoch))
    assert h.view.high_watermark == end


def test_a_wiped_replica_fetching_a_snapshot_does_not_count_for_check_quorum() -> None:
    from kraft.core.messages import FetchSnapshotRequest

    h = Harness(node=1, voters=(1, 2, 3), log=build_log([(1, 3)]))
    _elect(h)
    leader = h.replica._leader
    assert leader is not None
    epoch = h.view.epoch
    snap = _oe(1, 3)
    before = leader.check_quorum_at
    h.now += 10
    h.recv(2, FetchSnapshotRequest(CLUSTER, WIPED, epoch, snap, 0, max_bytes=1 << 20))
    assert leader.check_quorum_at == before  # the timer did not restart
    h.recv(2, FetchSnapshotRequest(CLUSTER, key(2), epoch, snap, 0, max_bytes=1 << 20))
    assert leader.check_quorum_at == h.now + leader.check_quorum_ms
