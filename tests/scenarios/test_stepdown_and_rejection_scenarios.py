"""A candidate a majority refused stops asking; a leader that steps down answers its held
Fetches once, at once.

Kafka 4.3.1's KafkaRaftClient.maybeSendVoteRequests sends Vote requests only while
`epochElection().isVoteRejected()` is false: a candidate that can no longer reach a majority
asks nobody again, not even a voter that has not answered yet, and waits out its election
timer (pollCandidate), then becomes Prospective. With four voters two refusals decide, while
the fourth voter's request is still unanswered: the candidate must not resend it at the
request timeout. The simulator's clusters rarely have four voters and a request timeout
shorter than the election timeout, so the replica is driven by hand here.

A leader holding a caught-up follower's Fetch (KIP-595's long poll) that resigns answers that
Fetch in the same step, NOT_LEADER_OR_FOLLOWER in its epoch and naming itself (Kafka's
transitionToResigned completes its fetch purgatory so), and holds it no longer. One that
follows a newer leader answers it so too, naming the new leader and epoch (Kafka's
onBecomeFollower); one that becomes Unattached in a newer epoch answers it at once in the same
way, where Kafka keeps it until its max wait (README, deviations).
"""

from __future__ import annotations

import pytest
from hand_driven import HandDriven
from memory_logs import key
from scenario_harness import CLUSTER, Cluster, leader_caught_up

from kraft.core.effects import Send, StateChanged
from kraft.core.events import Receive, SendFailed, Shutdown, Tick
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from kraft.core.timing import QuorumTiming
from kraft.core.vocabulary import ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

S = ReplicaState
ME = NodeId(1)
# A request timeout well inside the election timeout: an unanswered Vote would be resent
# several times before the candidate's election timer runs out.
TIMING = QuorumTiming(election_timeout_ms=1000, request_timeout_ms=100, retry_backoff_ms=20)


class Candidate(HandDriven):
    """Replica 1 of voters {1, 2, 3, 4}, driven by hand; `sends` lists every Send it makes
    with the time it was made."""

    def __init__(self) -> None:
        super().__init__(CLUSTER, (1, 2, 3, 4), timing=TIMING)

    def votes_sent(self, since: int) -> list[tuple[int, int, VoteRequest]]:
        """(time, destination, request) of each VoteRequest sent at or after `since`."""
        return [
            (at, int(s.dst), s.message)
            for at, s in self.sends
            if at >= since and isinstance(s.message, VoteRequest)
        ]

    def stand(self) -> dict[int, VoteRequest]:
        """Run out the election timer, win the pre-vote of voters 2 and 3: a Candidate in
        epoch 1; the Vote request sent to each other voter."""
        self.tick_until(S.PROSPECTIVE)
        pre = {d: m for _, d, m in self.votes_sent(self.now) if m.pre_vote}
        assert sorted(pre) == [2, 3, 4]
        for src in (2, 3):
            self.grant(src, pre[src])
        assert (self.replica.view().state, self.replica.view().epoch) == (S.CANDIDATE, 1)
        votes = {d: m for _, d, m in self.votes_sent(self.now) if not m.pre_vote}
        assert sorted(votes) == [2, 3, 4]
        return votes


def _answer(epoch: Epoch, granted: bool) -> VoteResponse:
    return VoteResponse(ErrorCode.NONE, NodeId(-1), epoch, granted)


@pytest.mark.parametrize("fourth", ["silent", "send failed"])
def test_a_candidate_a_majority_refused_asks_nobody_until_its_election_timer_runs_out(
    fourth: str,
) -> None:
    """Voters 2 and 3 refuse: 3 votes of 4 can no longer be had. Voter 4 has not answered
    (its request unanswered, or its send failed and is due again after the retry backoff);
    the candidate resends it nothing, at the request timeout or ever, until its election
    timer runs out and it becomes Prospective, whose pre-votes then go to every voter."""
    c = Candidate()
    votes = c.stand()
    if fourth == "send failed":
        c.step(SendFailed(c.now + 1, NodeId(4), votes[4]))
    for src in (2, 3):
        c.step(Receive(c.now + 1, NodeId(src), _answer(Epoch(1), False), votes[src]))
    assert c.replica.view().state is S.CANDIDATE
    refused_at = c.now
    while c.replica.view().state is S.CANDIDATE:
        effects = c.tick()
    assert c.now >= refused_at + 4 * TIMING.request_timeout_ms, "the election timer, not sooner"
    assert [e.new for e in effects if isinstance(e, StateChanged)] == [S.PROSPECTIVE]
    after = c.votes_sent(refused_at)
    assert [(d, m.pre_vote) for at, d, m in after if at < c.now] == []
    assert sorted((d, m.pre_vote) for at, d, m in after if at == c.now) == [
        (2, True),
        (3, True),
        (4, True),
    ]


def test_a_candidate_one_voter_refused_still_asks_the_silent_ones_again() -> None:
    """One refusal of four voters: a majority may still grant, so the unanswered requests
    go out again at the request timeout (the retries the case above must not make)."""
    c = Candidate()
    votes = c.stand()
    c.step(Receive(c.now + 1, NodeId(2), _answer(Epoch(1), False), votes[2]))
    sent_at = c.now - 1
    while not c.votes_sent(sent_at + 1) and c.replica.view().state is S.CANDIDATE:
        c.tick()
    again = c.votes_sent(sent_at + 1)
    assert c.replica.view().state is S.CANDIDATE
    assert sorted((at, d, m.pre_vote) for at, d, m in again) == [
        (sent_at + TIMING.request_timeout_ms, 3, False),
        (sent_at + TIMING.request_timeout_ms, 4, False),
    ]


FETCH_TOKEN = 7101


def holding_a_fetch() -> tuple[Cluster, int, int, FetchRequest]:
    """A 3-voter cluster whose leader holds a caught-up voter's Fetch (max wait 500 ms):
    the cluster, the leader, the fetcher and the Fetch."""
    c = Cluster(3, seed=5, election_timeout_ms=1000, fetch_timeout_ms=2000)
    leader = leader_caught_up(c)
    fetcher = next(i for i in c.nodes if i != leader)
    v = c.view(leader)
    fetch = FetchRequest(CLUSTER, key(fetcher), v.epoch, v.end_offset, v.last_epoch, Offset(0),
                         max_wait_ms=500)  # fmt: skip
    r = c.r(leader)
    held = r.step(Receive(c.now, NodeId(fetcher), fetch, None, FETCH_TOKEN))
    assert not [e for e in held if isinstance(e, Send) and e.reply_to == FETCH_TOKEN]
    return c, leader, fetcher, fetch


def test_a_resigning_leader_answers_its_held_fetch_once_at_once() -> None:
    """A leader holds a caught-up voter's Fetch, then is asked to shut down: it resigns in
    that step and answers the held Fetch there, NOT_LEADER_OR_FOLLOWER, naming itself in its
    epoch; later ticks (past the Fetch's max wait) answer it no second time."""
    c, leader, fetcher, fetch = holding_a_fetch()
    v = c.view(leader)
    r = c.r(leader)
    effects = r.step(Shutdown(c.now))
    assert (r.view().state, r.view().epoch) == (S.RESIGNED, v.epoch)
    answers = [e for e in effects if isinstance(e, Send) and e.reply_to == FETCH_TOKEN]
    assert [(int(a.dst), a.message) for a in answers] == [
        (
            fetcher,
            FetchResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                NodeId(leader),
                v.epoch,
                Offset(-1),
                r.view().log_start_offset,
            ),
        )
    ]
    later = r.step(Tick(c.now + fetch.max_wait_ms + 1))
    assert not [e for e in later if isinstance(e, Send) and e.reply_to == FETCH_TOKEN]


@pytest.mark.parametrize("ended_by", ["begin-quorum-epoch", "vote"])
def test_a_leader_of_a_past_epoch_answers_its_held_fetch_once_naming_the_new_epoch(
    ended_by: str,
) -> None:
    """A leader holding a caught-up voter's Fetch learns a newer epoch: from the third voter's
    BeginQuorumEpoch (it follows that voter) or from its Vote request (it votes for it: in
    Kafka, Unattached with a vote). The held Fetch is answered in that step,
    NOT_LEADER_OR_FOLLOWER, naming the new epoch and its leader (none when it voted), and not
    again once its max wait has passed."""
    c, leader, fetcher, fetch = holding_a_fetch()
    v = c.view(leader)
    third = next(i for i in c.nodes if i not in (leader, fetcher))
    newer = Epoch(v.epoch + 1)
    if ended_by == "vote":
        msg: BeginQuorumEpochRequest | VoteRequest = VoteRequest(
            CLUSTER, key(third), newer, v.last_epoch, v.end_offset, voter=key(leader)
        )
        want_state, want_leader = (
            S.VOTED,
            NodeId(-1),
        )  # it grants the vote (Kafka: Unattached, voted)
    else:
        msg = BeginQuorumEpochRequest(CLUSTER, NodeId(third), newer, voter=key(leader))
        want_state, want_leader = S.FOLLOWER, NodeId(third)
    r = c.r(leader)
    effects = r.step(Receive(c.now, NodeId(third), msg, None, FETCH_TOKEN + 1))
    assert (r.view().state, r.view().epoch) == (want_state, newer)
    answers = [e for e in effects if isinstance(e, Send) and e.reply_to == FETCH_TOKEN]
    assert [(int(a.dst), a.message) for a in answers] == [
        (
            fetcher,
            FetchResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
                want_leader,
                newer,
                Offset(-1),
                r.view().log_start_offset,
            ),
        )
    ]
    later = r.step(Tick(c.now + fetch.max_wait_ms + 1))
    assert not [e for e in later if isinstance(e, Send) and e.reply_to == FETCH_TOKEN]
