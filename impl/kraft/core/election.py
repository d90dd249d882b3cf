"""Elections: the voter's side of the replica from a timeout to a won or lost election.

`ElectionRole` takes these steps over the replica's state (kraft.core.replica owns the state,
the transition table and the dispatch): ElectionTimeout, the KIP-996 pre-vote of a
Prospective, BecomeCandidate, HandleVoteRequest (Kafka's granting rules per state) and
HandleVoteResponse, up to handing a won election to the leader's side (kraft.core.leader).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kraft.core import quorum_math as qm
from kraft.core.effects import ActionTaken, ElectionsExhausted
from kraft.core.events import SendFailed
from kraft.core.messages import Request, VoteRequest, VoteResponse
from kraft.core.quorum_math import PY
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import MAX_EPOCH, Epoch, NodeId

if TYPE_CHECKING:
    from kraft.core.replica import Replica

U = ReplicaState.UNATTACHED
V = ReplicaState.VOTED
C = ReplicaState.CANDIDATE
F = ReplicaState.FOLLOWER
R = ReplicaState.RESIGNED
P = ReplicaState.PROSPECTIVE


class ElectionRole:
    """The steps of standing for election and of voting, over the replica's state."""

    __slots__ = ("_r",)

    def __init__(self, replica: Replica) -> None:
        self._r = replica

    # ------------------------------------------------------------------ standing

    def random_election_timeout(self) -> int:
        r = self._r
        t = r._timing.election_timeout_ms
        return qm.randomized_election_timeout(PY, t, r._rng.randrange(t)) if t > 0 else 0

    def keeps_election_timer(self, new: ReplicaState) -> bool:
        """Kafka's transitionToUnattached: moving to Unattached (or back to Voted) keeps the
        time left on the election timer when coming from Unattached, Voted, Candidate,
        Resigned, or a Prospective whose pre-vote a majority did not reject; so a candidate
        with a stale log bumping epochs cannot keep postponing everyone else's election.
        Casting a vote restarts the timer (Kafka: the candidate has at least our chances)."""
        r = self._r
        old = r._state
        if not r._started or new not in (U, V) or r._election_deadline is None:
            return False
        if old is U and new is V:
            return False  # a vote granted
        if old is P:
            return not r._voters.cannot_reach_majority(r._rejected)
        return old in (U, V, C, R)

    def election_timeout(self, *, at_start: bool = False) -> None:
        """ElectionTimeout (Kafka 4.x poll*): Unattached, Voted, Follower (fetch timer) and
        Candidate become Prospective in their epoch; a Prospective that got no majority in time
        goes back; Resigned moves to Unattached in the next epoch. `at_start`: the only voter
        of its voter set stands as it starts (Kafka's KafkaRaftClient.initialize), as if its
        timer had run out, from Resigned too, in its epoch: its own pre-vote and vote are a
        majority, so it leads before its first event."""
        r = self._r
        st = r._state
        if st is not P and r._epoch >= MAX_EPOCH:
            # No larger epoch can be encoded or persisted: stand no more (still vote, follow).
            r._election_deadline = r._fetch_deadline = None
            r._out.append(ElectionsExhausted(r._epoch))
            return
        r._out.append(ActionTaken(Action.ELECTION_TIMEOUT))
        if st is P:
            self._prospective_lost()
        elif st is R and not at_start:
            r._transition(U, Epoch(r._epoch + 1))
        else:
            leader = r._leader_id if st is F else None
            r._transition(P, r._epoch, leader=leader)
            if not r.pre_vote_enabled:
                self._become_candidate()
            else:
                self.maybe_win_election()

    def _prospective_lost(self) -> None:
        """A lost or timed-out pre-vote: back to the leader we knew, else to Voted (a vote cast
        in this epoch) or Unattached, in the same epoch (Kafka
        prospectiveTransitionAfterElectionLoss)."""
        r = self._r
        if r._leader_id is not None:
            r._transition(F, r._epoch, leader=r._leader_id)
        elif r._voted_for is not None:
            r._transition(V, r._epoch, voted=r._voted_for)
        else:
            r._transition(U, r._epoch)

    def _become_candidate(self) -> None:
        """BecomeCandidate: bump the epoch, vote for ourselves (persisted first), ask for votes."""
        r = self._r
        r._out.append(ActionTaken(Action.BECOME_CANDIDATE))
        r._transition(C, Epoch(r._epoch + 1))
        self.maybe_win_election()

    def maybe_win_election(self) -> None:
        """A majority of pre-votes makes a Prospective a Candidate; a majority of votes makes
        a Candidate the Leader (a single voter goes all the way in one step)."""
        r = self._r
        if r._state is P and r._voters.is_majority(r._granted):
            self._become_candidate()
        elif r._state is C and r._voters.is_majority(r._granted):
            r._lead.become_leader()

    def vote_request(self, dst: NodeId) -> VoteRequest:
        """A Candidate's vote request carries its new epoch; a Prospective's pre-vote carries
        its current epoch, unchanged (Kafka buildVoteRequest: quorum.epoch() either way)."""
        r = self._r
        return VoteRequest(
            cluster_id=r._cfg.cluster_id,
            candidate=r._me,
            candidate_epoch=r._epoch,
            last_epoch=r._log.last_epoch,
            last_end_offset=r._log.end_offset,
            voter=r._voter_key(dst),
            pre_vote=r._state is P,
        )

    def handle_vote_response(
        self, src: NodeId, resp: VoteResponse, in_reply_to: Request | None
    ) -> None:
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_VOTE_RESPONSE))
        if resp.error is ErrorCode.UNSUPPORTED_VERSION and r._state is P:
            # Kafka: a voter that does not know pre-vote; stand for election at once.
            self._become_candidate()
            return
        if resp.error is not ErrorCode.UNKNOWN_LEADER_EPOCH:
            # Kafka's maybeHandleCommonResponse reads the epoch and leader an answer names
            # before its error (an INVALID_VOTER_KEY naming a later epoch moves us there).
            r._learn(resp.leader_id, resp.leader_epoch)
        if resp.error not in (ErrorCode.NONE, ErrorCode.FENCED_LEADER_EPOCH):
            if r._state in (P, C) and src in r._retry:
                r._retry[src] = r._now + r._timing.retry_backoff_ms
            return
        st = r._state
        if st not in (P, C) or resp.leader_epoch != r._epoch:
            return  # no longer standing, or an answer from another election
        if isinstance(in_reply_to, VoteRequest) and (
            in_reply_to.pre_vote != (st is P) or in_reply_to.candidate_epoch != r._epoch
        ):
            return  # answers a request of another round (pre-vote vs vote)
        if resp.error is not ErrorCode.NONE or src in r._granted or src in r._rejected:
            # Nothing to count. A repeated answer: its voter left the retry map with its first
            # answer (below), and only entering a state refills it. FENCED_LEADER_EPOCH naming
            # our own epoch: a conforming voter answers FENCED with its larger epoch, which
            # moved us on above; so its request stays due at its timeout, as unanswered.
            return
        if src not in r._voters.ids:
            return
        r._retry.pop(src, None)
        if resp.vote_granted:
            r._granted.add(src)
            self.maybe_win_election()
            return
        r._rejected.add(src)
        if r._voters.cannot_reach_majority(r._rejected):
            if st is P:
                self._prospective_lost()
            else:
                # Kafka: a rejected candidate stops asking and waits out its election timer,
                # then becomes Prospective (e.g. two voters: one refusal decides).
                r._retry = {}

    # ------------------------------------------------------------------ voting

    def vote_failed(self, ev: SendFailed) -> None:
        r = self._r
        req = ev.request
        assert isinstance(req, VoteRequest)
        # Only while standing: a Vote of this epoch failing after we won it is no request of
        # our Leader's (Kafka's onBecomeLeader resets every connection).
        if r._state in (P, C) and req.candidate_epoch == r._epoch and ev.dst in r._retry:
            r._retry[ev.dst] = r._now + r._timing.retry_backoff_ms

    def refusal(self) -> VoteResponse:
        return self.vote_response(ErrorCode.INVALID_REQUEST, False)

    def vote_response(self, error: ErrorCode, granted: bool) -> VoteResponse:
        r = self._r
        return VoteResponse(error, r._leader_or_none(), r._epoch, granted)

    def handle_vote_request(
        self, src: NodeId, req: VoteRequest, _in_reply_to: Request | None
    ) -> None:
        """HandleVoteRequest, checks in Kafka's order (handleVoteRequest). A pre-vote is
        answered like a vote but never records one."""
        r = self._r
        r._out.append(ActionTaken(Action.HANDLE_VOTE_REQUEST))
        err = r._request_error(req.cluster_id)
        # A candidate bumped its epoch past its log's; a prospective did not (Kafka).
        if req.pre_vote:
            bad_epoch = req.last_epoch > req.candidate_epoch
        else:
            bad_epoch = req.last_epoch >= req.candidate_epoch
        if err is None and (req.last_epoch < 0 or req.last_end_offset < 0 or bad_epoch):
            err = ErrorCode.INVALID_REQUEST
        if err is not None:
            r._send(src, self.vote_response(err, False))
            return
        # 1. A larger epoch is known: reject. A larger epoch moves us to it first, for a
        #    pre-vote too (Kafka: the prospective's epoch is one a leader or candidate reached).
        if req.candidate_epoch < r._epoch:
            r._send(src, self.vote_response(ErrorCode.FENCED_LEADER_EPOCH, False))
            return
        if req.candidate_epoch > r._epoch:
            r._transition(U, req.candidate_epoch)
        if not r._addressed_to_me(req.voter):
            r._send(src, self.vote_response(ErrorCode.INVALID_VOTER_KEY, False))
            return
        granted = self._can_grant(req)
        if granted and not req.pre_vote and r._voted_for is None:
            if r._state is U:
                r._transition(V, r._epoch, voted=req.candidate)  # persisted first
            elif r._state is P:
                r._transition(P, r._epoch, voted=req.candidate)  # persisted first
        r._send(src, self.vote_response(ErrorCode.NONE, granted))

    def _can_grant(self, req: VoteRequest) -> bool:
        """The granting rules of Kafka's EpochState.canGrantVote, per state. No voter
        membership is asked of either side: as KIP-853/856 and Kafka 4.x
        (QuorumState.canGrantVote) do, any replica, voter or observer, may grant its vote to
        any candidate whose log is up to date: voter sets change, and a replica may not yet
        know that it or the candidate became a voter. Only the candidate counts votes, from
        its own voter set; a request meant for another replica key is refused before this
        (INVALID_VOTER_KEY)."""
        r = self._r
        # The candidate's log is at least as up-to-date: (last epoch, end offset).
        mine = r._log.end
        up_to_date = qm.log_up_to_date(
            PY, req.last_epoch, req.last_end_offset, mine.epoch, mine.offset
        )
        st = r._state
        if st in (U, V, P):
            if req.pre_vote:
                return up_to_date  # a vote cast in this epoch does not bind a pre-vote
            # One vote per epoch: only the candidate already voted for gets it again.
            if r._voted_for is not None:
                return r._same_replica(r._voted_for, req.candidate)
            if r._leader_id is not None:
                return False  # a Prospective that still knows its leader
            return up_to_date
        if st is F:
            # A follower vouches for a pre-vote only until its leader answered a Fetch: a
            # voter cut off from a live leader cannot disrupt it (KIP-996).
            return req.pre_vote and not r._has_fetched and up_to_date
        if st is C or st is R:
            # Kafka 4.x (CandidateState, ResignedState): a pre-vote iff the log is up to date;
            # never a vote, the epoch's vote being its own.
            return req.pre_vote and up_to_date
        return False  # a leader has chosen
