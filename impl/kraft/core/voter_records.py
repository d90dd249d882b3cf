"""The voter set as the log states it (KIP-853): Voters control records to voter sets, and the
replica's view of its voter set kept in step with its log.

- `voter_set_of` turns a VotersRecord (the whole voter set in one record) into a VoterSet of
  replica keys; endpoints are not the core's business (the node reads them from the same
  records, kraft.server.voters).
- `voter_sets_in` finds the Voters records in record batches (only control batches are
  decoded), as (offset, voter set) pairs for LogMetadata.append: a voter set takes effect when
  appended, not when committed, and is undone when truncated away (KIP-856).
- `voters_record_at` is what a snapshot ending at an offset must carry (KIP-853: the Voters
  record of the voter set in force there; None for a static voter set).
- `refresh_voters` makes the replica (and its leader bookkeeping, check-quorum included) use
  the latest voter set of its log after an append, a truncation or a snapshot install changed
  it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.control_records import ControlRecordType as Kind
from kraft.control_records import VotersRecord, control_record_type, decode_control_record
from kraft.core.messages import Records
from kraft.core.voter_set import VoterSet
from kraft.ids import DirectoryId, NodeId, Offset, ReplicaKey
from kraft.records import CorruptRecordError, decode_records, iter_batches

if TYPE_CHECKING:
    from kraft.core.replica import Replica

__all__ = ["refresh_voters", "voter_keys_of", "voter_set_of", "voter_sets_in", "voters_record_at"]


def voter_keys_of(record: VotersRecord) -> tuple[ReplicaKey, ...]:
    return tuple(
        ReplicaKey(NodeId(v.voter_id), DirectoryId(v.voter_directory_id)) for v in record.voters
    )


def voter_set_of(record: VotersRecord) -> VoterSet:
    return VoterSet(voter_keys_of(record), record)


def voter_sets_in(records: Records) -> list[tuple[Offset, VoterSet]]:
    """The voter sets the Voters records of these whole batches set, by record offset.
    Raises CorruptRecordError (or ValueError for a voter set naming an id twice) on a Voters
    record that cannot be decoded: the caller refuses such batches. Control records of other
    or unknown types are skipped."""
    found: list[tuple[Offset, VoterSet]] = []
    for position, header in iter_batches(records, verify=False):
        if not header.is_control:
            continue
        for record in decode_records(records, position, header):
            try:
                kind = control_record_type(record)
            except CorruptRecordError:
                continue  # a control record of a type KRaft does not know: not ours to judge
            if kind is not Kind.VOTERS:
                continue
            control = decode_control_record(record)
            assert isinstance(control, VotersRecord)
            found.append((Offset(record.offset), voter_set_of(control)))
    return found


def refresh_voters(r: Replica) -> None:
    """The replica's voter set is its log's latest (KIP-856: in force once appended)."""
    voters = r._log.voters
    if voters is r._voters:
        return
    r._voters = voters
    r._is_voter = voters.contains(r._me)
    ld = r._leader
    if ld is not None:
        ld.set_voters(voters)
        # Kafka's LeaderState.timeUntilCheckQuorumExpires: with one voter check-quorum never
        # expires (a removed leader whose one remaining voter is away keeps leading until its
        # removal commits: resigning then would leave no replica able to win an election).
        if len(voters) == 1:
            ld.check_quorum_at = None
        elif ld.check_quorum_at is None:
            ld.check_quorum_at = r._now + ld.check_quorum_ms


def voters_record_at(r: Replica, end_offset: Offset) -> VotersRecord | None:
    """The Voters record of the voter set in force before `end_offset` (a snapshot ending
    there holds it, with KRaftVersion 1); None when that set is the static configuration's."""
    return r._log.voters_at(Offset(end_offset - 1)).record
