"""The client's Producer: a resend after an unknown outcome reuses the sequence (so the
leader deduplicates it), anything else after one takes a new producer id (so no gap)."""

from __future__ import annotations

import asyncio

import pytest

from kraft import client
from kraft.client import Address, AppendAck, ClientError, Producer, append
from kraft.errors import ErrorCode
from kraft.ids import Epoch, NodeId, Offset

NODE = Address("127.0.0.1", 1)


def _fake(outcomes: list[ErrorCode | None], seen: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
    async def fake(bootstrap, values, timeout_ms, producer, sequence):  # type: ignore[no-untyped-def]
        seen.append((producer.producer_id, sequence))
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise ClientError("fake", outcome)
        return AppendAck(Offset(0), Offset(len(values) - 1), Epoch(1), NodeId(1))

    return fake


def test_a_resend_after_an_unknown_outcome_reuses_its_sequence(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(client, "_append", _fake([ErrorCode.REQUEST_TIMED_OUT, None, None], seen))
    p = Producer()
    with pytest.raises(ClientError):
        asyncio.run(append([NODE], [b"a", b"b"], producer=p))
    asyncio.run(append([NODE], [b"a", b"b"], producer=p))  # the same values again
    asyncio.run(append([NODE], [b"c"], producer=p))
    assert seen == [(p.producer_id, 0), (p.producer_id, 0), (p.producer_id, 2)]


def test_other_values_after_an_unknown_outcome_take_a_new_producer_id(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(client, "_append", _fake([ErrorCode.REQUEST_TIMED_OUT, None], seen))
    p = Producer()
    first = p.producer_id
    with pytest.raises(ClientError):
        asyncio.run(append([NODE], [b"a"], producer=p))
    asyncio.run(append([NODE], [b"z"], producer=p))
    assert seen[0] == (first, 0)
    assert seen[1][0] != first and seen[1][1] == 0


def test_a_refused_sequence_is_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(
        client, "_append", _fake([ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, None], seen)
    )
    p = Producer()
    first = p.producer_id
    with pytest.raises(ClientError):
        asyncio.run(append([NODE], [b"a"], producer=p))
    asyncio.run(append([NODE], [b"a"], producer=p))
    assert seen[1][0] != first
