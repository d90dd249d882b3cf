"""Seeded bugs for campaigns: replica factories that break one protocol rule, so a campaign
can show that it finds, groups and reports a violation (`kraft campaign --mutant NAME`).

Mutants are looked up by name on the executors, so only the name crosses the wire.
"""

from __future__ import annotations

from dataclasses import replace

from kraft.core.effects import Effect
from kraft.core.events import Event
from kraft.core.vocabulary import ReplicaState
from refinement.sim import (
    NodeSetup,
    ReplicaFactory,
    ReplicaViewLike,
    SimReplica,
    core_replica_factory,
)


class _EagerHighWatermark:
    """A leader that exposes its whole log as committed, without waiting for a majority
    (KIP-595: the leader advances the high watermark only to an offset a majority of voters
    have fetched)."""

    __slots__ = ("_inner",)

    def __init__(self, inner: SimReplica) -> None:
        self._inner = inner

    def start(self) -> list[Effect]:
        return self._inner.start()

    def step(self, event: Event) -> list[Effect]:
        return self._inner.step(event)

    def next_deadline_ms(self) -> int:
        return self._inner.next_deadline_ms()

    def view(self) -> ReplicaViewLike:
        v = self._inner.view()
        if v.state is ReplicaState.LEADER and v.end_offset > 0:
            # The core's view is a frozen dataclass; the mutant lies about one field of it.
            lied: ReplicaViewLike = replace(v, high_watermark=v.end_offset)  # type: ignore[type-var]
            return lied
        return v


def eager_high_watermark(setup: NodeSetup) -> SimReplica:
    return _EagerHighWatermark(core_replica_factory(setup))


MUTANTS: dict[str, ReplicaFactory] = {
    "eager-hwm": eager_high_watermark,
}
