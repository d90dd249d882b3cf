"""kraft.event_loop: the loop a node runs on, uvloop when installed unless asked for asyncio's."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from kraft import event_loop


async def _which() -> str:
    await asyncio.sleep(0)
    return type(asyncio.get_running_loop()).__module__.partition(".")[0]


def test_asyncio_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(event_loop.EVENT_LOOP_ENV, "asyncio")
    assert event_loop.loop_factory() is None
    assert event_loop.loop_name() == "asyncio"
    assert event_loop.run(_which()) == "asyncio"


def test_uvloop_by_default_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(event_loop.EVENT_LOOP_ENV, raising=False)
    expected = "asyncio" if importlib.util.find_spec("uvloop") is None else "uvloop"
    assert event_loop.loop_name() == expected
    assert event_loop.run(_which()) == expected
