"""Scenario tests of the leader's bookkeeping rules at their exact boundaries (issue #16, the
leader.py sweep's LeaderState survivors), on a leader of a dynamic quorum driven by hand:

- check-quorum with one voter left that is not the leader (a leader that removed itself, its
  removal uncommitted) never expires, whatever that voter does: a Fetch from it does not start
  the timer again (Kafka 4.3.1's LeaderState.timeUntilCheckQuorumExpires: one voter, never);
- a leader that removed itself counts only the voters towards the majority its check-quorum
  needs: of voters {2, 3}, both must fetch to restart the timer, one alone does not (Kafka's
  updateCheckQuorumForFollowingVoter subtracts one only while the leader is in voterStates);
- a voter removed from the voter set still counts for check-quorum with the Fetch it made
  before its removal, until the timer next restarts (Kafka 4.3.1's
  updateVoterAndObserverStates leaves fetchedVoters as it is): of five voters, one more
  Fetch after the removal restarts the timer, and a Fetch from the removed voter itself no
  longer counts;
- a voter that never fetched in the leader's epoch and is removed is listed among
  DescribeQuorum's observers as one whose last Fetch was at -1 ms, so its session ends at
  299,999 ms exactly (Kafka's ReplicaState.lastFetchTimestamp starts at -1;
  clearInactiveObservers drops an observer once now - lastFetchTimestamp >= 300,000 ms).
"""

from __future__ import annotations

from hand_driven import HandDriven
from memory_logs import key

from kraft.control_records import Endpoint, VoterEntry, VotersRecord
from kraft.core.effects import ActionTaken
from kraft.core.events import Receive
from kraft.core.messages import FetchRequest, RemoveVoterRequest
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.ids import ClusterId, NodeId, Offset

CLUSTER = ClusterId("leader-state-rules")
ADMIN = NodeId(-1)
TIMING = QuorumTiming(election_timeout_ms=100, fetch_timeout_ms=2000)
CHECK_QUORUM_MS = 3000  # 1.5 x the fetch timeout, stated here, not imported from the core
SESSION_MS = 300_000  # Kafka's OBSERVER_SESSION_TIMEOUT_MS
EPOCH_RECORDS = 3  # LeaderChange, KRaftVersion, Voters: a dynamic quorum's first leader

L = ReplicaState.LEADER
R = ReplicaState.RESIGNED


class Leader(HandDriven):
    """Replica 1 of a dynamic quorum (voters 1..n from the bootstrap checkpoint), elected at
    once and driven by hand from `start_ms` on; its log effects are performed."""

    def __init__(self, voters: int, *, start_ms: int = 0) -> None:
        record = VotersRecord(
            0,
            tuple(
                VoterEntry(v, key(v).directory_id, (Endpoint("CONTROLLER", "h", 9000 + v),), 0, 1)
                for v in range(1, voters + 1)
            ),
        )
        super().__init__(CLUSTER, (), timing=TIMING, start_ms=start_ms,
                         voter_history=((Offset(-1), voter_set_of(record)),))  # fmt: skip
        self.tick()  # its election timer: Prospective
        for v in [*range(2, voters + 1)] * 2:  # pre-votes, then votes
            if self.state in (ReplicaState.PROSPECTIVE, ReplicaState.CANDIDATE):
                self.grant(v, None)
        assert self.state is L
        assert self.log.end_offset == EPOCH_RECORDS

    def fetch(self, voter: int, offset: int, at: int) -> None:
        """`voter` fetches from `offset` at `at` (its log holds the leader's epoch below it)."""
        epoch = self.replica.view().epoch
        req = FetchRequest(CLUSTER, key(voter), epoch, Offset(offset), epoch, Offset(0))
        self.step(Receive(at, NodeId(voter), req, None))

    def remove(self, voter: int, at: int) -> None:
        """The operator removes `voter`; the leader appends the new Voters record."""
        end = self.log.end_offset
        self.step(Receive(at, ADMIN, RemoveVoterRequest(CLUSTER, key(voter)), reply_to=7))
        assert self.log.end_offset == end + 1
        assert voter not in self.replica.view().voters  # in force once appended

    @property
    def state(self) -> ReplicaState:
        return self.replica.view().state

    @property
    def hwm(self) -> int | None:
        return self.replica.view().high_watermark

    def resigns_at(self, at: int) -> bool:
        """Tick at `at`: True if the leader resigned in that step."""
        return ActionTaken(Action.RESIGN) in self.tick(at)


# -- check-quorum under a changing voter set


def test_a_removed_leader_with_one_voter_left_never_restarts_check_quorum() -> None:
    ld = Leader(3)
    t0 = ld.now
    ld.fetch(2, EPOCH_RECORDS, t0)  # commits the epoch's records
    ld.remove(3, t0)
    ld.fetch(2, 4, t0)  # commits the removal of 3: voters {1, 2}
    assert ld.hwm == 4
    ld.remove(1, t0)  # voters {2}: the leader is no longer a voter
    # Voter 2 fetches once without reaching the removal: it stays uncommitted.
    ld.fetch(2, 4, t0 + 10)
    assert ld.hwm == 4 and ld.state is L
    # That Fetch started no check-quorum timer: the leader still leads three timeouts later.
    for at in (t0 + 10 + CHECK_QUORUM_MS, t0 + 10 + 3 * CHECK_QUORUM_MS):
        assert not ld.resigns_at(at)
        assert ld.state is L


def test_a_removed_leader_needs_every_one_of_two_voters_to_fetch() -> None:
    ld = Leader(3)
    t0 = ld.now
    ld.fetch(2, EPOCH_RECORDS, t0)  # commits; with three voters one Fetch restarts the timer
    ld.remove(1, t0)  # voters {2, 3}, the leader outside them: a majority is both
    for at in (t0 + 1000, t0 + 2000, t0 + CHECK_QUORUM_MS - 1):
        ld.fetch(2, 4, at)  # voter 2 alone, at the leader's end (3 never fetched: no commit)
    assert ld.hwm == EPOCH_RECORDS
    assert not ld.resigns_at(t0 + CHECK_QUORUM_MS - 1)
    assert ld.resigns_at(t0 + CHECK_QUORUM_MS)  # 2's Fetches were not a majority
    assert ld.state is R


def test_a_removed_leaders_check_quorum_restarts_once_both_voters_fetched() -> None:
    ld = Leader(3)
    t0 = ld.now
    ld.fetch(2, EPOCH_RECORDS, t0)
    ld.remove(1, t0)
    ld.fetch(2, 4, t0 + 1000)
    ld.fetch(3, EPOCH_RECORDS, t0 + 2000)  # below the removal: it stays uncommitted
    assert ld.hwm == EPOCH_RECORDS
    assert not ld.resigns_at(t0 + 2000 + CHECK_QUORUM_MS - 1)
    assert ld.resigns_at(t0 + 2000 + CHECK_QUORUM_MS)


def test_a_removed_voters_earlier_fetch_still_counts_for_check_quorum() -> None:
    ld = Leader(5)  # a majority is three: the leader and two others
    t0 = ld.now
    ld.fetch(2, EPOCH_RECORDS, t0)
    ld.fetch(3, EPOCH_RECORDS, t0)  # two others: the timer restarts at t0
    assert ld.hwm == EPOCH_RECORDS
    ld.fetch(4, EPOCH_RECORDS, t0 + 100)  # one of the next two
    ld.remove(4, t0 + 200)  # voters {1, 2, 3, 5}: still the leader and two others
    ld.fetch(2, 4, t0 + 1000)  # the second, counting 4's: the timer restarts at t0 + 1000
    assert not ld.resigns_at(t0 + 1000 + CHECK_QUORUM_MS - 1)
    assert ld.resigns_at(t0 + 1000 + CHECK_QUORUM_MS)
    assert ld.state is R


def test_a_removed_voters_fetch_after_its_removal_does_not_count() -> None:
    ld = Leader(5)
    t0 = ld.now
    ld.fetch(2, EPOCH_RECORDS, t0)
    ld.fetch(3, EPOCH_RECORDS, t0)  # the timer restarts at t0
    ld.remove(4, t0 + 200)
    ld.fetch(4, 4, t0 + 300)  # no longer a voter: an observer's Fetch
    ld.fetch(2, 4, t0 + 1000)  # one voter since the restart: not enough
    assert not ld.resigns_at(t0 + CHECK_QUORUM_MS - 1)
    assert ld.resigns_at(t0 + CHECK_QUORUM_MS)
    assert ld.state is R


# -- DescribeQuorum's observers: a removed voter that never fetched


def _observer_ids(ld: Leader, at: int) -> list[int]:
    ld.tick(at)
    desc = ld.replica.describe_quorum()
    assert desc is not None
    return [int(d.replica.id) for d in desc.observers]


def test_a_removed_voter_that_never_fetched_is_an_observer_until_299999_ms() -> None:
    ld = Leader(3, start_ms=SESSION_MS - 2000)
    ld.fetch(2, EPOCH_RECORDS, ld.now)  # commits; voter 3 never fetches in this epoch
    ld.remove(3, ld.now)
    desc = ld.replica.describe_quorum()
    assert desc is not None
    [three] = desc.observers
    assert three.replica == key(3)
    assert (three.log_end_offset, three.last_fetch_timestamp_ms) == (-1, -1)
    # Its session counts from -1 ms: listed at 299,998 ms (299,999 ms on), gone at 299,999.
    assert _observer_ids(ld, SESSION_MS - 2) == [3]
    assert ld.state is L
    assert _observer_ids(ld, SESSION_MS - 1) == []
