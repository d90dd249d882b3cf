"""`kraft quorum reassign` argument checks (exit 2) and an unreachable quorum (exit 1); the
voter-change commands refuse a timeout that is no positive number (exit 2); against a fake
leader, the plan is made again before each step (a leader change moves the new leader last)
and each step is shown as it starts and once it has committed."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest

from kraft.cli import main
from kraft.client import Address
from kraft.client_voters import VoterChange
from kraft.ids import DirectoryId, NodeId, ReplicaKey
from kraft.protocol import uuid_to_base64


def test_bad_voters_are_refused_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["quorum", "reassign", "--bootstrap", "127.0.0.1:1", "--voters", "x@y"])
    assert status == 2
    assert "--voters" in capsys.readouterr().err


def test_a_missing_configuration_is_refused_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(
        ["quorum", "reassign", "--bootstrap", "127.0.0.1:1", "--voters-from", "/nonexistent.p"]
    )
    assert status == 2
    assert "cannot read" in capsys.readouterr().err


def test_an_unreachable_quorum_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    from kraft.cluster import free_ports

    port = free_ports(1)[0]
    voters = "4@127.0.0.1:9:AAAAAAAAAAAAAAAAAAAAAQ"
    status = main(
        [
            "quorum",
            "reassign",
            "--bootstrap",
            f"127.0.0.1:{port}",
            "--voters",
            voters,
            "--dry-run",
            "--timeout-ms",
            "300",
        ]
    )
    assert status == 1
    assert "kraft quorum reassign" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["add-voter", "remove-voter", "reassign"])
@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_a_timeout_that_is_not_a_positive_number_is_refused_with_exit_2(
    command: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rest = {
        "add-voter": ["--command-config", "/nonexistent.properties"],
        "remove-voter": ["-i", "3", "-d", "AAAAAAAAAAAAAAAAAAAAAQ"],
        "reassign": ["--voters", "4@127.0.0.1:9:AAAAAAAAAAAAAAAAAAAAAQ"],
    }[command]
    with pytest.raises(SystemExit) as exit_:
        main(["quorum", command, "--bootstrap", "127.0.0.1:1", "--timeout-ms", value, *rest])
    assert exit_.value.code == 2
    assert "--timeout-ms" in capsys.readouterr().err


def _key(n: int) -> ReplicaKey:
    return ReplicaKey(NodeId(n), DirectoryId(uuid.UUID(int=n)))


class _FakeQuorum:
    """The leader's view as the command sees it: DescribeQuorum, AddRaftVoter and
    RemoveRaftVoter, each change committed at once. After `elect_after` changes, voter 4
    wins an election; a leader that removes itself is still named leader by the next
    DescribeQuorum (it leads until its removal commits, KIP-856), then voter 5 leads."""

    def __init__(self, voters: list[int], leader: int, elect_after: int) -> None:
        self.voters = {_key(n) for n in voters}
        self.leader = NodeId(leader)
        self.elect_after = elect_after
        self.changes: list[str] = []
        self.resigning = False

    async def describe(self, _bootstrap: object, _timeout_ms: int = 0) -> SimpleNamespace:
        voters = [SimpleNamespace(replica=k) for k in sorted(self.voters)]
        report = SimpleNamespace(description=SimpleNamespace(voters=voters, leader_id=self.leader))
        if self.resigning:
            self.resigning = False
            self.leader = NodeId(5)
        return report

    def _changed(self, what: str) -> VoterChange:
        self.changes.append(what)
        answer = VoterChange(self.leader, Address("127.0.0.1", 1))
        if len(self.changes) == self.elect_after:
            self.leader = NodeId(4)
        return answer

    async def add(self, _b: object, voter_id: NodeId, *_: object) -> VoterChange:
        self.voters.add(_key(voter_id))
        return self._changed(f"add {voter_id}")

    async def remove(self, _b: object, voter_id: NodeId, *_: object) -> VoterChange:
        self.voters.discard(_key(voter_id))
        self.resigning = voter_id == self.leader
        return self._changed(f"remove {voter_id}")


def test_the_plan_is_made_again_after_a_leader_change_and_each_step_is_shown(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kraft.cli.reassign
    import kraft.client_voters

    quorum = _FakeQuorum([1, 2, 3], leader=1, elect_after=4)
    monkeypatch.setattr(kraft.cli.reassign, "describe_quorum", quorum.describe)
    monkeypatch.setattr(kraft.client_voters, "add_voter", quorum.add)
    monkeypatch.setattr(kraft.client_voters, "remove_voter", quorum.remove)
    voters = ",".join(f"{n}@127.0.0.1:{9000 + n}:{uuid_to_base64(_key(n).directory_id)}"
                      for n in (4, 5, 6))  # fmt: skip
    assert main(["quorum", "reassign", "--bootstrap", "127.0.0.1:1", "--voters", voters]) == 0
    out = capsys.readouterr().out.splitlines()
    # Planned with leader 1: add 4, 5, 6, remove 2, 3, then 1. Voter 4 is elected after the
    # fourth change: 1 is no longer the leader, so the plan made again removes 1 before 3.
    assert quorum.changes == ["add 4", "add 5", "add 6", "remove 2", "remove 1", "remove 3"]
    started = [line for line in out if line.endswith(" ...")]
    assert [line.split(":")[0] for line in started] == [f"Step {i}/6" for i in range(1, 7)]
    assert started[4].startswith("Step 5/6: remove voter 1 ") and "(leader 4)" in started[4]
    committed = [line for line in out if " committed in " in line]
    assert len(committed) == 6
    assert out[-1] == "Reassigned: the voters are 4, 5, 6"


def test_the_leader_removed_last_is_named_until_it_resigns(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import kraft.cli.reassign
    import kraft.client_voters

    quorum = _FakeQuorum([1, 2], leader=1, elect_after=99)
    monkeypatch.setattr(kraft.cli.reassign, "describe_quorum", quorum.describe)
    monkeypatch.setattr(kraft.client_voters, "add_voter", quorum.add)
    monkeypatch.setattr(kraft.client_voters, "remove_voter", quorum.remove)
    voters = f"5@127.0.0.1:9005:{uuid_to_base64(_key(5).directory_id)}"
    assert main(["quorum", "reassign", "--bootstrap", "127.0.0.1:1", "--voters", voters]) == 0
    # The last removal is of the leader; the next DescribeQuorum still names it (a leader
    # outside the voter set): the command must see the target reached, not fail.
    assert quorum.changes == ["add 5", "remove 2", "remove 1"]
    assert capsys.readouterr().out.splitlines()[-1] == "Reassigned: the voters are 5"
