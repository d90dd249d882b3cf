"""The replica's dispatch tables cover every event, message and request type: a type added to
kraft.core.events or kraft.core.messages without a handler fails here, not in a run."""

from __future__ import annotations

import typing

from replica_harness import Harness

from kraft.core.events import Event
from kraft.core.messages import Message, Request, Response


def _types(alias: object) -> set[type]:
    return set(typing.get_args(alias))


def test_every_event_type_has_a_handler() -> None:
    r = Harness().replica
    assert set(r._on_event) == _types(Event)


def test_every_message_type_has_a_handler() -> None:
    r = Harness().replica
    assert set(r._on_message) == _types(Message)


def test_every_request_has_a_refusal_and_a_failed_send_handler() -> None:
    r = Harness().replica
    requests = _types(Request)
    assert requests
    assert set(r._refusals) == requests
    assert set(r._on_failed) == requests


def test_a_refusal_answers_with_the_response_to_its_request() -> None:
    r = Harness().replica
    responses = {t.__name__: t for t in _types(Response)}
    for req, refusal in r._refusals.items():
        answer = refusal()
        assert type(answer) is responses[req.__name__.replace("Request", "Response")]
