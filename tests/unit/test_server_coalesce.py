"""kraft.server.coalesce.AppendGroups: runs of plain appends merge; outcomes split back."""

from __future__ import annotations

import itertools

from kraft.core.events import ClientAppend
from kraft.ids import Offset, ProducerId
from kraft.server.coalesce import AppendGroups


def _append(request_id: int, n: int, producer: int = -1) -> ClientAppend:
    records = tuple((None, f"{request_id}-{i}".encode()) for i in range(n))
    return ClientAppend(0, records, request_id, ProducerId(producer), 0 if producer >= 0 else -1)


def test_runs_of_plain_appends_merge_in_order_and_their_outcome_splits_back() -> None:
    groups = AppendGroups()
    ids = itertools.count(100)
    appends = [_append(1, 1), _append(2, 2), _append(3, 1, producer=7), _append(4, 1)]
    out = groups.coalesce(appends, lambda: next(ids))
    assert [(e.request_id, len(e.records)) for e in out] == [(100, 3), (3, 1), (4, 1)]
    assert out[0].records == appends[0].records + appends[1].records
    assert len(groups) == 1
    assert groups.members(100, Offset(10), Offset(12)) == [(1, 10, 10), (2, 11, 12)]
    assert len(groups) == 0  # answered once
    assert groups.members(4, Offset(13), Offset(13)) == [(4, 13, 13)]


def test_a_lone_or_empty_append_is_stepped_as_it_came() -> None:
    groups = AppendGroups()
    empty = ClientAppend(0, (), 2)
    out = groups.coalesce([_append(1, 1), empty], lambda: 99)
    assert out == [_append(1, 1), empty] and len(groups) == 0
