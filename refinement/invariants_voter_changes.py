"""Checkers of the answers a leader gives the operator's voter changes (KIP-853's
AddRaftVoter and RemoveRaftVoter, kraft.core.reconfig), over a replica's voter history (the
voter sets its log states, by offset: `NodeState.voter_history`).

- VoterChangeAnswered: a replica answers a voter change in the step that receives it, unless
  it accepts it (an AddRaftVoter starts probing the new voter, a RemoveRaftVoter appends its
  Voters record); and what it answers agrees with its log: NONE only once a Voters record
  making that change is committed (below its HWM; an AddRaftVoter that asks for no commit,
  KIP-1186's ack_when_committed false, is answered in the step that appends the record,
  before it commits), DUPLICATE_VOTER only when the voter id is
  in its voter set, VOTER_NOT_FOUND only when the voter is not (or is the last one), and
  REQUEST_TIMED_OUT to a change it accepted only while the change is not committed (a
  committed change is answered NONE, kraft.core.commits' rule).
- VoterChangeEventuallyAcknowledged (a liveness property, checked by the simulator's
  liveness phase): in a healed cluster whose settled leader committed its latest change, a
  change the operator then asks (adding a caught-up observer, else removing a follower) is
  acknowledged with NONE within the bound.
"""

from __future__ import annotations

import itertools

from kraft.core.voter_set import VoterSet
from kraft.errors import ErrorCode
from kraft.ids import NodeId, Offset, ReplicaKey
from refinement.invariants import Violation

VOTER_CHANGE_ANSWERED = "VoterChangeAnswered"
VOTER_CHANGE_EVENTUALLY_ACKNOWLEDGED = "VoterChangeEventuallyAcknowledged"

VoterHistory = tuple[tuple[Offset, VoterSet], ...]


def _verb(add: bool) -> str:
    return "AddRaftVoter" if add else "RemoveRaftVoter"


def _history_text(history: VoterHistory) -> str:
    return ", ".join(f"{o}:{sorted(v.ids)}" for o, v in history)


def change_offsets(history: VoterHistory, voter: ReplicaKey, add: bool) -> list[Offset]:
    """The offsets of the Voters records that add (remove) `voter`: each one's set holds
    (lacks) the voter and the set before it did not (did)."""
    return [
        offset
        for (_, before), (offset, after) in itertools.pairwise(history)
        if (voter in after.voters) is add and (voter in before.voters) is not add
    ]


def unanswered(node: NodeId, voter: ReplicaKey, add: bool) -> Violation:
    return Violation(
        VOTER_CHANGE_ANSWERED,
        f"node {node} neither answered nor accepted {_verb(add)} of {voter}",
    )


def voter_change_answered(
    node: NodeId,
    voter: ReplicaKey,
    add: bool,
    error: ErrorCode,
    *,
    history: VoterHistory,
    hwm: Offset | None,
    accepted: bool,
    ack_when_committed: bool = True,
) -> Violation | None:
    """Node's answer `error` to a change of `voter`, given its voter history and HWM as it
    answers; `accepted`: the node accepted this very request earlier."""
    latest = history[-1][1] if history else None
    problem: str | None = None
    made = change_offsets(history, voter, add)
    if error is ErrorCode.NONE:
        if ack_when_committed and not (made and hwm is not None and made[0] < hwm):
            problem = "no committed Voters record makes that change"
        elif not ack_when_committed and not (made and (hwm is None or made[-1] >= hwm)):
            problem = (
                "it was asked to answer once the change is appended, and no Voters record"
                " making it waits for its commit"
            )
    elif error is ErrorCode.DUPLICATE_VOTER:
        if add and latest is not None and not latest.contains_id(voter.id):
            problem = f"the voter id {voter.id} is not in its voter set {sorted(latest.ids)}"
    elif error is ErrorCode.VOTER_NOT_FOUND:
        if not add and latest is not None and voter in latest.voters and len(latest) > 1:
            problem = f"the voter is in its voter set {sorted(latest.ids)}"
    elif error is ErrorCode.REQUEST_TIMED_OUT and accepted and hwm is not None:
        stated = [v for o, v in history if o < hwm]
        if stated and (voter in stated[-1].voters) is add:
            problem = "it accepted the change, which is committed (answered NONE at its commit)"
    if problem is None:
        return None
    return Violation(
        VOTER_CHANGE_ANSWERED,
        f"node {node} answered {_verb(add)} of {voter} with {error.name}, but {problem}"
        f" (HWM {hwm}; voter sets {_history_text(history)})",
    )


def eventually_acknowledged(
    voter: ReplicaKey, add: bool, bound_ms: int, answers: list[str]
) -> Violation:
    return Violation(
        VOTER_CHANGE_EVENTUALLY_ACKNOWLEDGED,
        f"within {bound_ms}ms of healing, the settled leader did not acknowledge"
        f" {_verb(add)} of {voter} (answers: {', '.join(answers) or 'none'})",
    )
