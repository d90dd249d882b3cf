"""What a leader does when its high watermark moves or its log grows, and what that does to
the Fetches it holds (KIP-595's long poll; issue #16's leader.py survivors).

Kafka 4.3.1's KafkaRaftClient.handleFetchRequest asks LeaderState.updateReplicaState about
the fetcher's offset; when that moves the HWM, onUpdateLeaderHighWatermark completes the
whole fetch purgatory (`fetchPurgatory.completeAll`), and a local append's flush completes the
Fetches waiting below the new end (`updateLeaderEndOffsetAndTimestamp`: `maybeComplete`).
Kafka answers them in the same poll; kraft at a Tick of the same instant, once the driver has
performed the step's effects. Here, in a leader of voters {1, 2, 3} driven by hand, with
observer 4 fetching too:

- the step in which voter 2's Fetch moves the HWM over a client append emits exactly: the
  HandleFetchRequest action, HighWatermarkMoved, the append's AppendCommitted, then the
  AdvanceHighWatermark action, then the answer naming the new HWM;
- an observer's Fetch held at the leader's end is answered at the next tick of that same
  instant once a voter's Fetch moved the HWM (not at the end of its max wait), carrying the
  new HWM;
- a client append made while nothing is held wakes no Fetch held after it: an observer's
  Fetch held after the append (it already fetched what was appended) waits its max wait out,
  as Kafka's purgatory only completes the Fetches waiting when the log grew;
- a client append made while a Fetch is held answers that Fetch at the next tick, with the
  new records.
"""

from __future__ import annotations

from hand_driven import HandDriven
from memory_logs import key

from kraft.core.effects import (
    ActionTaken,
    AppendCommitted,
    Effect,
    HighWatermarkMoved,
    Send,
)
from kraft.core.events import ClientAppend, Receive
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.core.vocabulary import Action
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, NodeId, Offset

CLUSTER = ClusterId("leader-hwm-and-held-fetch")
OBSERVER = 4
MAX_WAIT = 500
TOKEN = 4242  # the reply token of the observer's held Fetch


class Leader(HandDriven):
    """Replica 1 of voters {1, 2, 3}, elected by hand with voter 2's votes; its appends are
    performed on its MemoryLog as a driver would."""

    def __init__(self) -> None:
        super().__init__(CLUSTER, (1, 2, 3))
        self.elect(2)
        self.epoch = self.replica.view().epoch

    def fetch(self, src: int, offset: int, *, token: int | None = None) -> list[Effect]:
        """A Fetch from `src` at `offset` (in this epoch), long-polling MAX_WAIT ms."""
        req = FetchRequest(CLUSTER, key(src), self.epoch, Offset(offset), self.epoch, Offset(0),
                           max_wait_ms=MAX_WAIT)  # fmt: skip
        return self.step(Receive(self.now, NodeId(src), req, None, token))

    def append(self, value: bytes, request_id: int) -> list[Effect]:
        return self.step(ClientAppend(self.now, ((None, value),), request_id))


def _answers(effects: list[Effect], dst: int) -> list[FetchResponse]:
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and e.dst == dst and isinstance(e.message, FetchResponse)
    ]


def _steady() -> Leader:
    """The leader with its LeaderChange committed by voter 2 and nothing held."""
    ld = Leader()
    [answer] = _answers(ld.fetch(2, ld.end), 2)
    assert answer.high_watermark == ld.end
    ld.tick(ld.now)
    return ld


def test_a_voters_fetch_moving_the_hwm_emits_the_move_the_commit_then_the_action() -> None:
    ld = _steady()
    ld.append(b"a", request_id=7)
    first = ld.end - 1
    [served] = _answers(ld.fetch(2, first), 2)
    assert served.high_watermark == first and served.records

    effects = ld.fetch(2, ld.end)

    assert effects[:-1] == [
        ActionTaken(Action.HANDLE_FETCH_REQUEST),
        HighWatermarkMoved(Offset(ld.end)),
        AppendCommitted(7, Offset(first), Offset(first), ld.epoch),
        ActionTaken(Action.ADVANCE_HIGH_WATERMARK),
    ]
    [answer] = _answers(effects[-1:], 2)
    assert answer.high_watermark == ld.end and answer.records == b""


def test_a_held_observer_fetch_is_answered_at_once_when_a_voter_moves_the_hwm() -> None:
    ld = _steady()
    ld.append(b"a", request_id=7)
    first = ld.end - 1
    assert _answers(ld.fetch(OBSERVER, first), OBSERVER)[0].records
    assert _answers(ld.fetch(2, first), 2)[0].records
    held = ld.fetch(OBSERVER, ld.end, token=TOKEN)
    assert not _answers(held, OBSERVER), "nothing new for the observer: held"

    moved = ld.fetch(2, ld.end)
    assert HighWatermarkMoved(Offset(ld.end)) in moved
    assert not _answers(moved, OBSERVER)
    assert ld.replica.next_deadline_ms() == ld.now, "answered at this instant"

    effects = ld.tick(ld.now)
    [answer] = [e.message for e in effects if isinstance(e, Send) and e.reply_to == TOKEN]
    assert isinstance(answer, FetchResponse)
    assert (answer.error, answer.high_watermark, answer.records) == (
        ErrorCode.NONE,
        ld.end,
        b"",
    )


def test_an_append_with_nothing_held_wakes_no_fetch_held_after_it() -> None:
    ld = _steady()
    ld.append(b"a", request_id=7)
    appended_at = ld.now
    assert _answers(ld.fetch(OBSERVER, ld.end - 1), OBSERVER)[0].records
    held = ld.fetch(OBSERVER, ld.end, token=TOKEN)
    assert not _answers(held, OBSERVER)

    early = ld.tick(ld.now)
    assert not [e for e in early if isinstance(e, Send) and e.reply_to == TOKEN]
    assert ld.replica.next_deadline_ms() == appended_at + MAX_WAIT

    late = ld.tick()
    [answer] = [e.message for e in late if isinstance(e, Send) and e.reply_to == TOKEN]
    assert isinstance(answer, FetchResponse)
    assert (answer.error, answer.records) == (ErrorCode.NONE, b"")


def test_an_append_answers_a_held_fetch_at_the_next_tick_with_the_new_records() -> None:
    ld = _steady()
    held = ld.fetch(OBSERVER, ld.end, token=TOKEN)
    assert not _answers(held, OBSERVER)
    first = ld.end

    ld.append(b"a", request_id=7)
    assert ld.replica.next_deadline_ms() == ld.now, "answered at this instant"

    effects = ld.tick(ld.now)
    [answer] = [e.message for e in effects if isinstance(e, Send) and e.reply_to == TOKEN]
    assert isinstance(answer, FetchResponse)
    assert answer.error is ErrorCode.NONE
    assert answer.records == ld.log.read(Offset(first), 1 << 20).data
