"""A follower whose connection to its leader broke (SendFailed(broken=True): refused, reset or
closed by the leader's end) stands early, within a quarter of an election timeout instead of
at its fetch timeout; pre-vote (KIP-996) keeps a false alarm from disturbing a live leader.
Deviation from Kafka (README): Kafka backs the Fetch off and waits for the fetch timeout."""

from __future__ import annotations

from replica_harness import Harness, build_log, grant, of, sent, stand
from test_replica_fetch import follower, ok, the_fetch
from test_snapshots_follower import follower as snapshot_follower
from test_snapshots_follower import start_transfer

from kraft.core.effects import ActionTaken, ElectionState, PersistElectionState
from kraft.core.events import Receive, SendFailed, Tick
from kraft.core.messages import FetchRequest, Request, VoteRequest, VoteResponse
from kraft.core.vocabulary import Action, ReplicaState
from kraft.ids import Epoch, NodeId

S = ReplicaState
QUARTER = 1000 // 4  # a quarter of the default election timeout


def _broken_at(h: Harness, now: int, req: Request, dst: int = 2) -> None:
    h.now = now
    h.step(SendFailed(now, NodeId(dst), req, broken=True))


def _stands_at(h: Harness, limit: int = 5000) -> tuple[int, list[object]]:
    """Tick from deadline to deadline (no answers) until the replica is Prospective: when
    that happened and the effects of that step."""
    while h.replica.next_deadline_ms() <= limit:
        effects = h.tick()
        if h.view.state is S.PROSPECTIVE:
            return h.now, list(effects)
    raise AssertionError("never stood")


def test_a_broken_connection_to_the_leader_makes_a_voter_prospective_early() -> None:
    h = follower(fetch_timeout_ms=2000)
    _broken_at(h, 10, the_fetch(h.start_effects))
    at, effects = _stands_at(h)
    assert 10 <= at < 10 + QUARTER  # not the fetch timeout (2000 ms and more)
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.PROSPECTIVE, 2, 2)
    assert ActionTaken(Action.ELECTION_TIMEOUT) in effects
    assert {r.pre_vote for _, r in sent(effects, VoteRequest)} == {True}
    assert not of(effects, PersistElectionState)


def test_a_request_that_merely_failed_keeps_the_fetch_timeout() -> None:
    h = follower(fetch_timeout_ms=2000, retry_backoff_ms=20)
    h.step(SendFailed(10, NodeId(2), the_fetch(h.start_effects)))  # timed out, not broken
    for t in (30, QUARTER, 1999):
        h.step(Tick(t))
        assert h.view.state is S.FOLLOWER


def test_breaks_that_say_nothing_about_the_leader_change_nothing() -> None:
    # A broken link to another voter, a Fetch of an older epoch, an observer's link.
    h = follower(fetch_timeout_ms=2000)
    req = the_fetch(h.start_effects)
    _broken_at(h, 10, req, dst=3)
    old = FetchRequest(**{**_fields(req), "replica_epoch": Epoch(1)})
    _broken_at(h, 11, old)
    h.step(Tick(1999))
    assert h.view.state is S.FOLLOWER
    o = follower(node=4, fetch_timeout_ms=2000)
    _broken_at(o, 10, the_fetch(o.start_effects))
    o.step(Tick(1999))
    assert o.view.state is S.FOLLOWER


def _fields(req: FetchRequest) -> dict[str, object]:
    return {f: getattr(req, f) for f in req.__dataclass_fields__}


def test_followers_of_a_crashed_leader_notice_at_different_times() -> None:
    """Both followers notice at once; the random delay seldom lets both stand together."""
    stands = set()
    for seed in range(8):
        h = follower(seed=seed)
        _broken_at(h, 0, the_fetch(h.start_effects))
        stands.add(_stands_at(h)[0])
    assert all(0 <= t < QUARTER for t in stands) and len(stands) >= 4


def test_a_false_alarm_does_not_disturb_a_live_leader() -> None:
    """A transient break: the follower stands, but the leader and a follower still fetching
    from it refuse the pre-vote, so it follows the same leader again in the same epoch."""
    h = follower(fetch_timeout_ms=2000)
    _broken_at(h, 10, the_fetch(h.start_effects))
    _, effects = _stands_at(h)
    pre_votes = dict(sent(effects, VoteRequest))  # type: ignore[arg-type]
    # Node 3 still fetches from leader 2: it refuses (Kafka FollowerState.canGrantVote).
    other = follower(node=3, log=((1, 2),), fetch_timeout_ms=2000)
    other.recv(2, ok(2, 0))
    [(_, refusal)] = sent(other.recv(1, pre_votes[3]), VoteResponse)
    assert not refusal.vote_granted and other.view.state is S.FOLLOWER
    # The leader refuses too and stays leader in its epoch.
    lead = Harness(node=2, log=build_log([(1, 2)]), election=ElectionState(Epoch(1)))
    stand(lead)
    lead.recv(1, grant(2))
    [(_, leader_refusal)] = sent(lead.recv(1, pre_votes[2]), VoteResponse)
    assert not leader_refusal.vote_granted
    assert (lead.view.state, lead.view.epoch) == (S.LEADER, 2)
    h.step(Receive(h.now, NodeId(3), refusal))
    h.step(Receive(h.now, NodeId(2), leader_refusal))
    assert (h.view.state, h.view.epoch, h.view.leader_id) == (S.FOLLOWER, 2, 2)
    assert h.stored is not None and h.stored.epoch == 2


def test_a_break_under_a_snapshot_fetch_counts_too() -> None:
    """The leader crashed while this follower fetched a snapshot from it (KIP-630)."""
    h = snapshot_follower(fetch_timeout_ms=2000)
    req = start_transfer(h)
    _broken_at(h, 10, req)
    at, _ = _stands_at(h)
    assert 10 <= at < 10 + QUARTER
