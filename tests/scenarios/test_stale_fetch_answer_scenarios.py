"""A late Fetch answer for a log position the follower has since rewritten.

Kafka's follower matches an answer with the Fetch it sent; this core recognizes an answer to an
older Fetch by the position that Fetch asked from (its fetch offset and last fetched epoch) and
ignores it when the log no longer ends there. The end offset alone is not enough: a log that
was truncated and refilled to the same length ends there in another epoch, and a divergence
found for the old log would truncate records committed since. The simulator's sweep rarely
delivers an answer that late, so the follower is driven by hand, under the timing checkers.
"""

from __future__ import annotations

import dataclasses

from test_retry_timing_scenarios import CLUSTER, LEADER, Solo

from kraft.core.effects import TruncateLog
from kraft.core.events import SendFailed
from kraft.core.messages import BeginQuorumEpochRequest, FetchRequest, FetchResponse
from kraft.errors import ErrorCode
from kraft.ids import Epoch, Offset, OffsetAndEpoch
from kraft.records import encode_batch


def test_a_late_answer_to_a_fetch_from_a_log_position_since_rewritten_is_ignored() -> None:
    """The follower's log ends at 5 in epoch 1 when it sends Fetch B; B fails, the retry
    learns the log diverges at 3, and the records 3-4 of epoch 2 replace the old ones: the log
    ends at 5 again, now in epoch 2, all committed. B's answer then arrives, stating the
    divergence at 3 it found for the old log. It answers a position the follower no longer has
    (same end offset, another last epoch): ignored, nothing truncated."""
    s = Solo()
    effects = s.receive(0, LEADER, BeginQuorumEpochRequest(CLUSTER, LEADER, Epoch(2)), None)
    [a] = s.sent(FetchRequest, effects)
    old = b"".join(encode_batch(i, 1, [b"old"], timestamp_ms=0) for i in range(5))
    answer_a = FetchResponse(ErrorCode.NONE, LEADER, Epoch(2), Offset(0), Offset(0), records=old)
    [b] = s.sent(FetchRequest, s.receive(5, LEADER, answer_a, a.message))  # type: ignore[arg-type]
    assert isinstance(b.message, FetchRequest)
    assert (b.message.fetch_offset, b.message.last_fetched_epoch) == (5, 1)
    s.step(SendFailed(10, LEADER, b.message))
    c = s.tick_until_sent(FetchRequest, limit=1_000)
    diverging = FetchResponse(
        ErrorCode.NONE,
        LEADER,
        Epoch(2),
        Offset(0),
        Offset(0),
        diverging_epoch=OffsetAndEpoch(Epoch(1), Offset(3)),
    )
    [d] = s.sent(FetchRequest, s.receive(s.now + 1, LEADER, diverging, c.message))  # type: ignore[arg-type]
    assert s.replica.view().end_offset == 3
    new = b"".join(encode_batch(i, 2, [b"new"], timestamp_ms=0) for i in (3, 4))
    answer_d = FetchResponse(ErrorCode.NONE, LEADER, Epoch(2), Offset(3), Offset(0), records=new)
    s.receive(s.now + 1, LEADER, answer_d, d.message)  # type: ignore[arg-type]
    view = s.replica.view()
    assert (view.end_offset, view.last_epoch, view.high_watermark) == (5, 2, 3)
    late_b = dataclasses.replace(diverging, high_watermark=Offset(3))
    effects = s.receive(s.now + 1, LEADER, late_b, b.message)
    assert not [e for e in effects if isinstance(e, TruncateLog)]
    view = s.replica.view()
    assert (view.end_offset, view.last_epoch, view.high_watermark) == (5, 2, 3)


def test_a_divergence_below_the_log_start_is_ignored() -> None:
    """The follower restarted from a snapshot at 10 (its log starts and ends there) and does
    not know its high watermark yet. An answer claiming the logs diverge at 3 asks it to
    truncate records a snapshot holds, all committed: no leader that holds them could say so
    (Kafka's log refuses such a truncation). Nothing is truncated, the log keeps its start,
    and the follower fetches on from its end."""
    s = Solo(snapshots=True, start=OffsetAndEpoch(Epoch(1), Offset(10)))
    effects = s.receive(0, LEADER, BeginQuorumEpochRequest(CLUSTER, LEADER, Epoch(2)), None)
    [a] = s.sent(FetchRequest, effects)
    assert s.replica.view().high_watermark is None
    below = FetchResponse(
        ErrorCode.NONE,
        LEADER,
        Epoch(2),
        Offset(-1),
        Offset(0),
        diverging_epoch=OffsetAndEpoch(Epoch(1), Offset(3)),
    )
    effects = s.receive(5, LEADER, below, a.message)
    assert not [e for e in effects if isinstance(e, TruncateLog)]
    assert (s.log.start_offset, s.log.end_offset, s.replica.view().end_offset) == (10, 10, 10)
    [b] = s.sent(FetchRequest, effects)
    assert isinstance(b.message, FetchRequest)
    assert (b.message.fetch_offset, b.message.last_fetched_epoch) == (10, 1)
