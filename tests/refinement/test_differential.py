"""The differential machines of the core's pure helpers (refinement.differential): the
unmutated helpers agree with their reference models, and a wrong helper is caught."""

from __future__ import annotations

import pytest

from kraft.core.commits import CommitRule
from kraft.core.log_metadata import LogMetadata
from refinement.differential import run_all


def test_the_helpers_agree_with_their_models():
    run_all(60, 30)


def test_an_append_accepted_below_the_hwm_left_undecided_is_caught(monkeypatch):
    original = CommitRule.accepted

    def lazy(self, request_id, first, last, epoch, *, high_watermark, log):  # type: ignore[no-untyped-def]
        original(self, request_id, first, last, epoch, high_watermark=None, log=log)
        return []

    monkeypatch.setattr(CommitRule, "accepted", lazy)
    with pytest.raises(AssertionError):
        run_all(60, 30)


def test_a_voter_set_installed_at_the_wrong_offset_is_caught(monkeypatch):
    original = LogMetadata.install_snapshot

    def shifted(self, snapshot_id, voters):  # type: ignore[no-untyped-def]
        original(self, snapshot_id, voters)
        self._voter_offsets = [snapshot_id.offset]

    monkeypatch.setattr(LogMetadata, "install_snapshot", shifted)
    with pytest.raises(AssertionError):
        run_all(60, 30)


def test_a_wrong_product_in_the_quorum_arithmetic_is_caught(monkeypatch):
    """PyOps.mul is what KIP-595's successor backoff and the timeout bounds multiply with."""
    from kraft.core import quorum_math

    monkeypatch.setattr(quorum_math.PyOps, "mul", lambda self, a, b: a // b if b else 0)
    with pytest.raises(AssertionError):
        run_all(60, 30)


def test_an_hwm_refused_for_a_majority_of_all_voters_is_caught(monkeypatch):
    """A one- or two-voter quorum's majority is every voter: its HWM must still be computed."""
    from kraft.core import quorum_math

    original = quorum_math.high_watermark

    def strict(ops, end_offsets, majority):  # type: ignore[no-untyped-def]
        if majority >= len(end_offsets):
            raise ValueError("no")
        return original(ops, end_offsets, majority)

    monkeypatch.setattr(quorum_math, "high_watermark", strict)
    with pytest.raises(ValueError):
        run_all(60, 30)


def test_an_int_narrowed_unlike_java_is_caught(monkeypatch):
    from refinement import differential

    monkeypatch.setattr(
        differential,
        "int32",
        lambda x: (x & 0xFFFFFFFF) - (1 << 31) if x & 1 << 31 else x & 0xFFFFFFFF,
    )
    with pytest.raises(AssertionError):
        run_all(60, 30)
