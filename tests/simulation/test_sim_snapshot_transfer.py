"""The FetchSnapshot transfer's checkers (refinement.invariants_snapshot_transfer): each rule on
hand-made steps, and the simulator catching a fetcher that leaves an abandoned `.part` behind
while the unmutated core holds them on the same seeds."""

from __future__ import annotations

import pytest
from memory_logs import key

from kraft.core.effects import (
    ActionTaken,
    DiscardSnapshotFetch,
    Send,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.events import Receive, SnapshotValidated
from kraft.core.messages import (
    FetchRequest,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
)
from kraft.core.snapshot_transfer import SnapshotFetcher
from kraft.core.vocabulary import Action, ReplicaState
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch
from refinement import invariants_snapshot_transfer as tr
from refinement.faults import PROFILES
from refinement.invariants_snapshot_transfer import Seen, TransferMonitor
from refinement.sim import SimConfig, simulate

F = ReplicaState.FOLLOWER
CLUSTER = ClusterId("transfer")
SID = OffsetAndEpoch(Epoch(2), Offset(20))
ME, LEADER = NodeId(2), NodeId(1)
SEEN = Seen(F, Epoch(3), LEADER, Offset(10), Offset(0), Offset(10), Epoch(3))


def _ask(position: int, sid: OffsetAndEpoch = SID, epoch: int = 3) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(CLUSTER, key(2), Epoch(epoch), sid, position, max_bytes=1 << 20)


def test_a_request_asks_the_position_held_of_an_installable_snapshot() -> None:
    ask = tr.fetch_snapshot_asks_its_position
    assert ask(ME, LEADER, _ask(0), SEEN, {}) is None
    assert ask(ME, LEADER, _ask(5), SEEN, {SID: bytearray(5)}) is None
    for found in (
        ask(ME, LEADER, _ask(0), SEEN, {SID: bytearray(5)}),  # a stale part kept
        ask(ME, LEADER, _ask(7), SEEN, {SID: bytearray(5)}),
        ask(ME, NodeId(3), _ask(0), SEEN, {}),  # not the leader
        ask(ME, LEADER, _ask(0, epoch=2), SEEN, {}),  # not its epoch
        ask(ME, LEADER, _ask(0, OffsetAndEpoch(Epoch(0), Offset(0))), SEEN, {}),  # bootstrap
        ask(ME, LEADER, _ask(0, OffsetAndEpoch(Epoch(4), Offset(20))), SEEN, {}),  # epoch ahead
        ask(ME, LEADER, _ask(0, OffsetAndEpoch(Epoch(2), Offset(9))), SEEN, {}),  # below HWM
    ):
        assert found is not None and found.name == tr.FETCH_SNAPSHOT_ASKS_ITS_POSITION


def _chunk_step(leader_epoch: int, src: NodeId = LEADER) -> tuple[Receive, WriteSnapshotChunk]:
    resp = FetchSnapshotResponse(
        ErrorCode.NONE, LEADER, Epoch(leader_epoch), SID, size=30, position=5, chunk=b"abc"
    )
    return Receive(0, src, resp), WriteSnapshotChunk(SID, 5, 30, b"abc")


def test_a_chunk_is_written_only_from_the_leaders_answer_of_its_epoch() -> None:
    parts = {SID: bytearray(8)}
    ev, chunk = _chunk_step(3)
    assert tr.chunk_written_from_its_leader(ME, ev, chunk, SEEN, parts) is None
    for ev, chunk in (_chunk_step(2), _chunk_step(3, src=NodeId(3))):
        found = tr.chunk_written_from_its_leader(ME, ev, chunk, SEEN, parts)
        assert found is not None and found.name == tr.CHUNK_WRITTEN_FROM_ITS_LEADER
    found = tr.chunk_written_from_its_leader(ME, None, chunk, SEEN, parts)
    assert found is not None


def test_a_part_is_held_only_by_the_transfer_that_began_it() -> None:
    begun = tr.PartBegun(SID, Epoch(3), LEADER)
    held = {SID: bytearray(5)}
    ok = tr.partial_snapshot_discarded(ME, begun, SEEN, held, regular_fetch=False)
    assert ok is None
    for found in (
        tr.partial_snapshot_discarded(ME, None, SEEN, held, regular_fetch=False),
        tr.partial_snapshot_discarded(
            ME, tr.PartBegun(SID, Epoch(2), LEADER), SEEN, held, regular_fetch=False
        ),
        tr.partial_snapshot_discarded(ME, begun, SEEN, held, regular_fetch=True),
    ):
        assert found is not None and found.name == tr.PARTIAL_SNAPSHOT_DISCARDED


def test_nothing_is_asked_while_the_driver_validates() -> None:
    # (The parts are left out: only the validation rule is exercised here.)
    m = TransferMonitor()
    assert m.step(ME, 1, None, [ValidateSnapshot(SID, 30)], view=SEEN, parts={}) is None
    timeout = m.step(ME, 1, None, [ActionTaken(Action.ELECTION_TIMEOUT)], view=SEEN, parts={})
    assert timeout is not None and timeout.name == tr.NOTHING_ASKED_WHILE_VALIDATING
    m = TransferMonitor()
    m.step(ME, 1, None, [ValidateSnapshot(SID, 30)], view=SEEN, parts={})
    sent = m.step(ME, 1, None, [Send(LEADER, _ask(0))], view=SEEN, parts={})
    assert sent is not None and sent.name == tr.NOTHING_ASKED_WHILE_VALIDATING
    m = TransferMonitor()
    m.step(ME, 1, None, [ValidateSnapshot(SID, 30)], view=SEEN, parts={})
    answered = SnapshotValidated(0, SID, False)
    assert m.step(ME, 1, answered, [Send(LEADER, _ask(0))], view=SEEN, parts={}) is None


def test_an_installed_snapshot_sets_the_log_and_the_hwm_at_its_end() -> None:
    at_end = Seen(F, Epoch(3), LEADER, Offset(20), Offset(20), Offset(20), Epoch(2))
    fetch = FetchRequest(CLUSTER, key(2), Epoch(3), Offset(20), Epoch(2), Offset(20), 1024, 500)
    assert tr.snapshot_installed_at_its_end(ME, SID, at_end, fetch) is None
    assert tr.snapshot_installed_at_its_end(ME, SID, at_end, None) is None
    for view, sent in (
        (Seen(F, Epoch(3), LEADER, Offset(10), Offset(20), Offset(20), Epoch(2)), None),
        (Seen(F, Epoch(3), LEADER, Offset(20), Offset(20), Offset(20), Epoch(3)), None),
        (at_end, FetchRequest(CLUSTER, key(2), Epoch(3), Offset(20), Epoch(3), Offset(20))),
    ):
        found = tr.snapshot_installed_at_its_end(ME, SID, view, sent)
        assert found is not None and found.name == tr.SNAPSHOT_INSTALLED_AT_ITS_END


def _abandon_keeping_the_part(self: SnapshotFetcher) -> None:
    """A fetcher's abandon that leaves the `.part` behind (no DiscardSnapshotFetch)."""
    self.transfer = None


@pytest.mark.parametrize("profile", ["mixed+snapshots", "lossy+snapshots"])
def test_the_sweep_catches_a_transfer_abandoned_without_its_part(
    profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = (
        tr.PARTIAL_SNAPSHOT_DISCARDED,
        tr.FETCH_SNAPSHOT_ASKS_ITS_POSITION,
        tr.CHUNK_ANSWER_TAKEN_EXACTLY,  # an abandon it does not announce
    )
    for seed in range(6):
        assert simulate(SimConfig(seed=seed, profile=PROFILES[profile])).ok
    monkeypatch.setattr(SnapshotFetcher, "abandon", _abandon_keeping_the_part)
    caught: list[str] = []
    for seed in range(6):
        r = simulate(SimConfig(seed=seed, profile=PROFILES[profile]))
        caught += [v.name for v in r.violations]
    assert caught and set(caught) <= set(names), caught


_handle_response = SnapshotFetcher.handle_response


def _fetch_timer_runs_while_validating(
    self: SnapshotFetcher, src: NodeId, resp: FetchSnapshotResponse, in_reply_to: Request | None
) -> None:
    """A fetcher whose fetch timeout keeps running while the driver validates."""
    r = self._r
    deadline = r._fetch_deadline
    _handle_response(self, src, resp, in_reply_to)
    t = self.transfer
    if t is not None and t.validating and r._fetch_deadline is None:
        r._fetch_deadline = deadline


def test_slow_validation_catches_a_fetch_timer_that_is_not_suspended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under mixed+snapshots+delays a validation now and then outlasts the fetch timeout: a
    follower whose fetch timer runs meanwhile stands (or looks for its leader) before the
    answer, which NothingAskedWhileValidating reports; the unmutated core holds."""
    profile = PROFILES["mixed+snapshots+delays"]
    assert profile.slow_validation > 0
    for seed in range(6):
        assert simulate(SimConfig(seed=seed, profile=profile)).ok
    monkeypatch.setattr(SnapshotFetcher, "handle_response", _fetch_timer_runs_while_validating)
    caught: list[str] = []
    for seed in range(6):
        config = SimConfig(seed=seed, max_events=1500, profile=profile)
        caught += [v.name for v in simulate(config).violations]
    assert caught and set(caught) <= {tr.NOTHING_ASKED_WHILE_VALIDATING}, caught


def _answer(
    error: ErrorCode = ErrorCode.NONE,
    *,
    sid: OffsetAndEpoch = SID,
    position: int = 5,
    size: int = 30,
    chunk: bytes = b"abc",
) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(error, LEADER, Epoch(3), sid, size, position, chunk)


def _taken(resp: FetchSnapshotResponse, effects: list[object], size: int | None = 30) -> bool:
    found = tr.chunk_answer_taken_exactly(
        ME,
        resp,
        effects,  # type: ignore[arg-type]
        asked=SID,
        held=5,
        size=size,
    )
    assert found is None or found.name == tr.CHUNK_ANSWER_TAKEN_EXACTLY
    return found is None


def test_a_chunk_answer_is_taken_exactly_as_the_follower_rule_says() -> None:
    write = WriteSnapshotChunk(SID, 5, 30, b"abc")
    discard = DiscardSnapshotFetch(SID)
    # A chunk that fits: written whole, the transfer kept; the last one is validated too.
    assert _taken(_answer(), [write])
    assert not _taken(_answer(), [])
    assert not _taken(_answer(), [write, discard])
    assert not _taken(_answer(), [WriteSnapshotChunk(SID, 5, 30, b"ab")])
    last = WriteSnapshotChunk(SID, 5, 8, b"abc")
    assert _taken(_answer(size=8), [last, ValidateSnapshot(SID, 8)], size=None)
    assert not _taken(_answer(size=8), [last], size=None)
    # Answers that cannot belong to the snapshot abandon the transfer, nothing written.
    for bad in (_answer(chunk=b""), _answer(size=0), _answer(size=7), _answer(size=31)):
        assert _taken(bad, [discard])
        assert not _taken(bad, [])
        assert not _taken(bad, [WriteSnapshotChunk(SID, 5, bad.size, bad.chunk), discard])
    # The leader no longer has it: abandoned.
    for gone in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE):
        assert _taken(_answer(gone), [discard])
        assert not _taken(_answer(gone), [])
    # Another position or snapshot: nothing changes. Other errors, malformed sizes: not judged.
    other = OffsetAndEpoch(Epoch(2), Offset(25))
    for stale in (_answer(position=2), _answer(sid=other)):
        assert _taken(stale, [])
        assert not _taken(stale, [discard])
    assert _taken(_answer(ErrorCode.UNKNOWN_SERVER_ERROR), [])
    assert _taken(_answer(size=-1), [])


def _ignoring_empty_chunks(
    self: SnapshotFetcher, src: NodeId, resp: FetchSnapshotResponse, in_reply_to: Request | None
) -> None:
    """A fetcher that puts an empty chunk aside instead of starting the transfer over."""
    if resp.error is ErrorCode.NONE and not resp.chunk:
        self._r._out.append(ActionTaken(Action.HANDLE_FETCH_SNAPSHOT_RESPONSE))
        return
    _handle_response(self, src, resp, in_reply_to)


def test_mangled_chunks_catch_a_fetcher_that_ignores_an_empty_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """mixed+snapshots+adversary mangles a fifth of the chunk answers (no bytes, no size, a size
    the chunk ends past or not the first chunk's): ChunkAnswerTakenExactly holds on the
    unmutated core and reports a fetcher that ignores an empty chunk."""
    profile = PROFILES["mixed+snapshots+adversary"]
    assert profile.mangle_chunk > 0
    mangled = 0
    for seed in range(6):
        r = simulate(SimConfig(seed=seed, profile=profile))
        assert r.ok, r.violations
        mangled += r.chunks_mangled
    assert mangled > 0
    monkeypatch.setattr(SnapshotFetcher, "handle_response", _ignoring_empty_chunks)
    caught: list[str] = []
    for seed in range(6):
        caught += [v.name for v in simulate(SimConfig(seed=seed, profile=profile)).violations]
    assert caught and set(caught) <= {tr.CHUNK_ANSWER_TAKEN_EXACTLY}, caught
