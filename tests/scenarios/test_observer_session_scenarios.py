"""An observer that stops fetching leaves DescribeQuorum's answer once its last Fetch is five
minutes old, as Kafka's LeaderState.clearInactiveObservers (OBSERVER_SESSION_TIMEOUT_MS =
300,000) drops it; one that keeps fetching stays listed, and a new observer arriving after that
makes the leader forget the silent one for good."""

from __future__ import annotations

from scenario_harness import Cluster, elect

from kraft.core.events import Tick

SESSION_MS = 300_000  # stated here, not imported from the core
OBSERVER, LATECOMER = 4, 5


def _observers(c: Cluster, lead: int) -> dict[int, int]:
    """DescribeQuorum's observers as the leader answers at the cluster's time: id -> last
    fetch time."""
    c.step(lead, Tick(c.now))  # the leader's clock reads the cluster's
    desc = c.r(lead).describe_quorum()
    assert desc is not None
    return {int(d.replica.id): d.last_fetch_timestamp_ms for d in desc.observers}


def test_a_silent_observer_is_listed_for_five_minutes_after_its_last_fetch() -> None:
    c = Cluster(3, observers=2, seed=5)
    c.crash(LATECOMER)  # joins later
    lead = elect(c)
    c.run_until(lambda: OBSERVER in _observers(c, lead))
    c.crash(OBSERVER)
    # A Fetch it left parked counts again when the leader answers it (Kafka's purgatory).
    c.run(c.now + 2_000)
    last = _observers(c, lead)[OBSERVER]
    c.run(last + SESSION_MS - 1)
    assert c.leader() == lead  # the voters kept fetching all along
    assert _observers(c, lead) == {OBSERVER: last}  # listed up to the last millisecond
    c.run(last + SESSION_MS)
    assert OBSERVER not in _observers(c, lead)  # gone exactly when its session ran out

    c.start(LATECOMER)
    c.run_until(lambda: LATECOMER in _observers(c, lead))
    assert set(_observers(c, lead)) == {LATECOMER}
    assert all(k.id != OBSERVER for k in c.r(lead)._leader.observers)  # forgotten, not hidden


def test_an_observer_that_keeps_fetching_stays_listed() -> None:
    c = Cluster(3, observers=1, seed=5)
    lead = elect(c)
    c.run_until(lambda: OBSERVER in _observers(c, lead))
    c.run(c.now + 2 * SESSION_MS)
    assert c.leader() == lead
    seen = _observers(c, lead)
    assert OBSERVER in seen and c.now - seen[OBSERVER] < SESSION_MS
