"""Coalescing client appends: the plain appends (no producer id) that the driver steps one
after the other in a batch become one ClientAppend of all their records, so one core step and
one record batch (kraft.server.driver). `AppendGroups` remembers each such append's members
and splits its outcome back among them by their record counts, in arrival order.

Idempotent appends and appends without records are never merged: an idempotent append is its
own batch carrying its producer id and sequence (kraft.core.producers), and an empty one is
refused on its own (INVALID_REQUEST).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from kraft.core.events import ClientAppend
from kraft.ids import NO_PRODUCER, Offset

__all__ = ["AppendGroups"]


class AppendGroups:
    """A coalesced append's request id -> its members: (request id, record count)."""

    __slots__ = ("_groups",)

    def __init__(self) -> None:
        self._groups: dict[int, tuple[tuple[int, int], ...]] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def coalesce(
        self, appends: Iterable[ClientAppend], new_id: Callable[[], int]
    ) -> list[ClientAppend]:
        """Each run of consecutive plain appends with records becomes one ClientAppend under
        a new request id (`new_id`); the others come out as they came, in their order."""
        out: list[ClientAppend] = []
        run: list[ClientAppend] = []
        for a in [*appends, None]:
            if a is not None and a.producer == NO_PRODUCER and a.records:
                run.append(a)
                continue
            if len(run) == 1:
                out.append(run[0])
            elif run:
                group = new_id()
                self._groups[group] = tuple((x.request_id, len(x.records)) for x in run)
                records = tuple(r for x in run for r in x.records)
                out.append(ClientAppend(run[-1].now_ms, records, group))
            run = []
            if a is not None:
                out.append(a)
        return out

    def members(
        self, request_id: int, first: Offset, last: Offset
    ) -> list[tuple[int, Offset, Offset]]:
        """The requests an outcome for [first, last] answers, each with its records' offsets:
        the members of a coalesced append (forgotten now), else the request itself."""
        members = self._groups.pop(request_id, None)
        if members is None:
            return [(request_id, first, last)]
        out = []
        at = first
        for member, count in members:
            out.append((member, at, Offset(at + count - 1)))
            at = Offset(at + count)
        return out

    def clear(self) -> None:
        """The leader stepped down: the driver answers every pending append itself."""
        self._groups.clear()
