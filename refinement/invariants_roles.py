"""Checker of who writes a replica's log (KIP-595): the leader of the epoch appends what it
writes (client records, control records), and a follower appends and truncates only from the
Fetch answers of its leader. No other role touches the log: a Prospective that still knows the
leader it timed out on, a Candidate, a Voted or Unattached replica, a Resigned leader.

- LogWrittenByItsRole: a step whose effects append records the leader encoded
  (AppendToLog.leader_encoded) starts or ends with the replica a Leader (a leader may resign in
  the step that wrote its lingering appends); a step whose effects append fetched records or
  truncate the log ends with the replica a Follower (an observer learns its leader from the
  answer it appends, in the same step).
- PastEpochAnswerIgnored: a Fetch or FetchSnapshot answer naming an epoch below the replica's
  own (an answer delayed across an election, even one from the node that leads now) is no
  longer relevant (Kafka's maybeHandleCommonResponse drops it): the step that handles it
  writes nothing from it (no append, truncation, HWM, log start, snapshot chunk, validation
  or install, no SnapshotRequired) and changes no role or election state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields

from kraft.core.effects import (
    AdvanceLogStartOffset,
    AppendToLog,
    Effect,
    HighWatermarkMoved,
    InstallSnapshot,
    PersistElectionState,
    SnapshotRequired,
    StateChanged,
    TruncateLog,
    ValidateSnapshot,
    WriteSnapshotChunk,
)
from kraft.core.messages import FetchResponse, FetchSnapshotResponse, Message
from kraft.core.vocabulary import ReplicaState
from kraft.ids import Epoch, NodeId
from refinement.invariants import Violation

LOG_WRITTEN_BY_ITS_ROLE = "LogWrittenByItsRole"
PAST_EPOCH_ANSWER_IGNORED = "PastEpochAnswerIgnored"

# What a step handling an answer of a past epoch must not emit.
_TAKEN_FROM_AN_ANSWER = (
    AppendToLog,
    TruncateLog,
    HighWatermarkMoved,
    AdvanceLogStartOffset,
    SnapshotRequired,
    WriteSnapshotChunk,
    ValidateSnapshot,
    InstallSnapshot,
    StateChanged,
    PersistElectionState,
)

_L = ReplicaState.LEADER
_F = ReplicaState.FOLLOWER


def log_written_by_its_role(
    node: NodeId, before: ReplicaState, after: ReplicaState, effects: Sequence[Effect]
) -> Violation | None:
    """The step of `node` from `before` to `after` emitted `effects`; a violation when it
    wrote its log in a role that does not."""
    for e in effects:
        if isinstance(e, AppendToLog):
            if e.leader_encoded:
                if _L not in (before, after):
                    what = f"appended records it encoded at {e.first_offset}-{e.last_offset}"
                    return _bad(node, before, after, what)
            elif after is not _F:
                what = f"appended fetched records at {e.first_offset}-{e.last_offset}"
                return _bad(node, before, after, what)
        elif isinstance(e, TruncateLog) and after is not _F:
            return _bad(node, before, after, f"truncated its log to {e.offset}")
    return None


def _bad(node: NodeId, before: ReplicaState, after: ReplicaState, what: str) -> Violation:
    return Violation(
        LOG_WRITTEN_BY_ITS_ROLE,
        f"node {node} {what} in a step from {before.value} to {after.value}",
    )


def past_epoch_answer_ignored(
    node: NodeId, src: NodeId, answer: Message, epoch_before: Epoch, effects: Sequence[Effect]
) -> Violation | None:
    """PastEpochAnswerIgnored for a step of `node`, in `epoch_before`, that handled `answer`
    from `src`."""
    if type(answer) not in (FetchResponse, FetchSnapshotResponse):
        return None
    assert isinstance(answer, FetchResponse | FetchSnapshotResponse)
    if answer.leader_epoch >= epoch_before:
        return None
    for e in effects:
        if isinstance(e, _TAKEN_FROM_AN_ANSWER):
            return Violation(
                PAST_EPOCH_ANSWER_IGNORED,
                f"node {node} in epoch {epoch_before} handled a {type(answer).__name__}"
                f" ({answer.error.name}) from {src} naming epoch {answer.leader_epoch} and"
                f" emitted {_described(e)}",
            )
    return None


def _described(e: Effect) -> str:
    """An effect with its fields, bytes left out (records, snapshot chunks)."""
    shown = ", ".join(
        f"{f.name}={getattr(e, f.name)}"
        for f in fields(e)
        if not isinstance(getattr(e, f.name), bytes | memoryview)
    )
    return f"{type(e).__name__}({shown})"
