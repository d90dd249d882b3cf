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
