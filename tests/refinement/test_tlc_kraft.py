"""TLC on spec/KRaft.tla: the CI models pass, the mutants fail with the named invariant, and
the witnesses (the real spec) reach what they say cannot happen (pre-vote is exercised).

Also checks the TLC output parser of refinement.tlc on output captured from a real TLC run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from refinement.tlc import (
    ErrorKind,
    Model,
    ModelKind,
    TlcError,
    check_model,
    config_constants,
    find_tla_jar,
    load_model,
    load_models,
    main,
    parse_tlc_output,
    write_table,
)

FIXTURES = Path(__file__).parent / "fixtures"

# KRaft.tla, and its scripted wrapper (a state constraint) for the figure-8 mutant.
KRAFT = [m for m in load_models() if m.spec.name in ("KRaft.tla", "MCKRaftScripted.tla")]
MUST_PASS = [m for m in KRAFT if m.kind in (ModelKind.CI, ModelKind.LIVENESS)]
MUTANTS = [m for m in KRAFT if m.kind is ModelKind.MUTANT]
WITNESSES = [m for m in KRAFT if m.kind is ModelKind.WITNESS]
DEEP = [m for m in KRAFT if m.kind is ModelKind.DEEP]

# The action names of KRaft.tla, which are the implementation's trace event names.
ACTIONS = {
    "ElectionTimeout",
    "BecomeCandidate",
    "HandleVoteRequest",
    "HandleVoteResponse",
    "BecomeLeader",
    "HandleBeginQuorumEpochRequest",
    "HandleBeginQuorumEpochResponse",
    "Resign",
    "HandleEndQuorumEpochRequest",
    "ClientAppend",
    "SendFetchRequest",
    "HandleFetchRequest",
    "HandleFetchResponse",
    "AdvanceHighWatermark",
    "Crash",
    "Restart",
    "DropMessage",
    "DuplicateMessage",
    # KIP-630
    "CreateSnapshot",
    "AdvanceLogStartOffset",
    "SendFetchSnapshotRequest",
    "HandleFetchSnapshotRequest",
    "HandleFetchSnapshotResponse",
    "InstallSnapshot",
    # KIP-853 voter changes
    "AddVoter",
    "RemoveVoter",
}


def _ids(models: list[Model]) -> list[str]:
    return [m.name for m in models]


@pytest.mark.tlc
@pytest.mark.parametrize("model", MUST_PASS, ids=_ids(MUST_PASS))
def test_kraft_model_passes(model: Model) -> None:
    result = check_model(model)
    assert result.ok, (
        f"{model.name}: {result.error_kind} {result.violated}\n{result.raw_output[-4000:]}"
    )
    assert result.distinct_states > 1
    assert result.depth > 1


@pytest.mark.tlc
@pytest.mark.parametrize("model", MUTANTS, ids=_ids(MUTANTS))
def test_kraft_mutant_violates_expected_invariant(model: Model) -> None:
    result = check_model(model)
    assert not result.ok
    # An invariant, or an action property such as MajorityReachedNewHighWatermark.
    assert result.error_kind in (ErrorKind.INVARIANT, ErrorKind.PROPERTY)
    assert result.violated == model.expect
    # TLC prints the behaviour that reaches the violation, starting from an initial state.
    assert result.counterexample_actions[0] == "Initial predicate"
    assert len(result.counterexample) == len(result.counterexample_actions) >= 2
    # Every step is named by its spec action, also the ones over the message bag.
    assert set(result.counterexample_actions[1:]) <= ACTIONS


@pytest.mark.tlc
@pytest.mark.parametrize("model", WITNESSES, ids=_ids(WITNESSES))
def test_kraft_witness_reaches_the_pre_vote_behaviour(model: Model) -> None:
    # The "cannot happen" invariant or action property is violated: the behaviour is reachable.
    result = check_model(model)
    assert not result.ok
    assert result.error_kind in (ErrorKind.INVARIANT, ErrorKind.PROPERTY)
    assert result.violated == model.expect
    assert model.judge(result) == (True, f"violates {model.expect} (expected)")
    actions = result.counterexample_actions
    assert set(actions[1:]) <= ACTIONS
    # Every witness goes through a pre-vote: Prospective -> Candidate before the first leader.
    assert "BecomeCandidate" in actions
    assert actions.index("BecomeCandidate") < actions.index("BecomeLeader")


@pytest.mark.tlc
@pytest.mark.slow
@pytest.mark.parametrize("model", DEEP, ids=_ids(DEEP))
def test_kraft_deep_model_passes(model: Model) -> None:
    result = check_model(model)
    assert result.ok, f"{model.name}: {result.error_kind} {result.violated}"


def test_registry_has_the_kraft_models_and_mutants() -> None:
    kinds = {m.kind for m in KRAFT}
    assert {
        ModelKind.CI,
        ModelKind.LIVENESS,
        ModelKind.MUTANT,
        ModelKind.WITNESS,
        ModelKind.DEEP,
    } <= kinds
    expected = {m.name: m.expect for m in MUTANTS}
    assert expected == {
        "KRaftMutantHwmNoEpochCheck": "LeaderCompleteness",
        "KRaftMutantVotedForNotPersisted": "ElectionSafety",
        "KRaftMutantLeaderKeepsStaleHwm": "FetchedHighWatermarkMonotonic",
        "KRaftMutantSnapshotBeyondHwm": "SnapshotMatchesLog",
        "KRaftMutantTwoUncommittedChanges": "AtMostOneUncommittedVoterChange",
        "KRaftMutantRemovedLeaderCountsItself": "MajorityReachedNewHighWatermark",
    }
    assert {m.name: m.expect for m in WITNESSES} == {
        "KRaftWitnessNoPreVoteRejectedByFollower": "NoPreVoteRejectedByFollower",
        "KRaftWitnessNoPreVoteWonDespiteRejection": "NoPreVoteWonDespiteRejection",
        "KRaftWitnessNoPreVoteLostToRejections": "NoPreVoteLostToRejections",
        # The only voter, restarted Resigned, stands in its epoch (Kafka's initialize).
        "KRaftWitnessNoLoneVoterStandsFromResigned": "NoLoneVoterStandsFromResigned",
    }
    assert "KRaftSolo" in {m.name for m in MUST_PASS}


def test_model_metadata_comes_from_the_first_config_line(tmp_path: Path) -> None:
    cfg = tmp_path / "M.cfg"
    cfg.write_text(
        "\\* model: spec=KRaft.tla kind=mutant expect=LogMatching timeout=60\n"
        "CONSTANTS\n  MaxEpoch = 2\nINIT Init\nNEXT Next\n"
    )
    model = load_model(cfg)
    assert model is not None
    assert (model.name, model.spec.name, model.kind) == ("M", "KRaft.tla", ModelKind.MUTANT)
    assert (model.expect, model.timeout_s, model.constants) == (
        "LogMatching",
        60.0,
        (("MaxEpoch", "2"),),
    )
    cfg.write_text("CONSTANTS\n  MaxEpoch = 2\n")
    assert load_model(cfg) is None  # not a model: no metadata line
    cfg.write_text("\\* model: spec=KRaft.tla kind=mutant\n")
    with pytest.raises(ValueError, match="expect"):
        load_model(cfg)


def test_parser_reads_a_captured_invariant_violation() -> None:
    # Captured with: python -m refinement.tlc (run_tlc) on KRaftMutantVotedForNotPersisted.
    text = (FIXTURES / "tlc_invariant_violation.out").read_text()
    result = parse_tlc_output(text)
    assert not result.ok
    assert result.error_kind is ErrorKind.INVARIANT
    assert result.violated == "ElectionSafety"
    assert result.distinct_states > 0
    assert result.states_generated >= result.distinct_states
    assert result.depth > 0
    assert result.counterexample_actions[0] == "Initial predicate"
    assert "BecomeLeader" in result.counterexample_actions
    assert "Restart" in result.counterexample_actions
    first, last = result.counterexample[0], result.counterexample[-1]
    assert first["elected"] == "{}"
    assert first["state"].startswith("(s")
    # The final state shows two leaders of epoch 1.
    assert last["elected"].count("<<1, s") == 2


def test_parser_names_a_conjoined_step_by_its_first_operator(tmp_path: Path) -> None:
    # KRaft's Next conjoins `KeepFetched` to each step; TLC labels such a step by the enclosing
    # definition and a source span, in which the action is the first operator applied.
    (tmp_path / "M.tla").write_text(
        "Next ==\n    \\/ \\E s \\in Server : ElectionTimeout(s) /\\ KeepFetched\n"
    )
    text = (
        "@!@!@STARTMSG 2110:1 @!@!@\nInvariant Inv is violated.\n@!@!@ENDMSG 2110 @!@!@\n"
        "@!@!@STARTMSG 2217:4 @!@!@\n1: <Initial predicate>\n/\\ x = 0\n\n"
        "@!@!@ENDMSG 2217 @!@!@\n"
        "@!@!@STARTMSG 2217:4 @!@!@\n2: <Next line 2, col 26 to line 2, col 58 of module M>\n"
        "/\\ x = 1\n\n@!@!@ENDMSG 2217 @!@!@\n"
    )
    result = parse_tlc_output(text, module_dir=tmp_path)
    assert result.violated == "Inv"
    assert result.counterexample_actions == ("Initial predicate", "ElectionTimeout")


def test_witness_metadata_needs_the_invariant_it_must_violate(tmp_path: Path) -> None:
    cfg = tmp_path / "W.cfg"
    cfg.write_text("\\* model: spec=KRaft.tla kind=witness expect=NoPreVoteRejectedByFollower\n")
    model = load_model(cfg)
    assert model is not None and model.kind is ModelKind.WITNESS
    assert model.expect == "NoPreVoteRejectedByFollower"
    cfg.write_text("\\* model: spec=KRaft.tla kind=witness\n")
    with pytest.raises(ValueError, match="expect"):
        load_model(cfg)


def test_parser_reads_a_captured_success() -> None:
    text = (FIXTURES / "tlc_success.out").read_text()
    result = parse_tlc_output(text)
    assert result.ok
    assert result.error_kind is ErrorKind.NONE
    assert result.violated is None
    assert result.counterexample == ()
    assert result.distinct_states > 0
    assert result.depth > 0
    assert result.seconds >= 0


def test_parser_without_verdict_is_not_ok() -> None:
    # A run cut short prints progress but neither success nor a violation.
    text = (
        "@!@!@STARTMSG 2200:0 @!@!@\n"
        "Progress(5) at 2026-01-01 00:00:00: 1,234 states generated, "
        "1,000 distinct states found, 17 states left on queue.\n"
        "@!@!@ENDMSG 2200 @!@!@\n"
    )
    result = parse_tlc_output(text)
    assert not result.ok
    assert result.error_kind is ErrorKind.OTHER
    assert (result.states_generated, result.distinct_states) == (1234, 1000)


def test_parser_reads_a_simulation_without_violation() -> None:
    # Abridged from `run_tlc(..., simulate=True)` on KRaftElection: TLC 2.18 prints no
    # "No error has been found" after a simulation, and -1 for the states it does not count.
    text = (
        "@!@!@STARTMSG 2188:0 @!@!@\nRunning Random Simulation with seed 1 with 2 workers\n"
        "@!@!@ENDMSG 2188 @!@!@\n"
        "@!@!@STARTMSG 2209:0 @!@!@\nProgress(-1) at 2026-11-21 10:53:33: 11582 states "
        "generated, -1 distinct states found, -1 states left on queue.\n"
        "@!@!@ENDMSG 2209 @!@!@\n"
        "@!@!@STARTMSG 2186:0 @!@!@\nFinished in 5305ms at (2026-11-21 10:53:33)\n"
        "@!@!@ENDMSG 2186 @!@!@\n"
    )
    result = parse_tlc_output(text)
    assert result.ok
    assert (result.states_generated, result.distinct_states) == (11582, 0)
    assert result.seconds == pytest.approx(5.305)


def test_parser_names_the_single_temporal_property() -> None:
    text = (
        "@!@!@STARTMSG 2116:1 @!@!@\nTemporal properties were violated.\n\n"
        "@!@!@ENDMSG 2116 @!@!@\n"
        "@!@!@STARTMSG 2186:0 @!@!@\nFinished in 01min 02s at (2026-01-01 00:00:00)\n"
        "@!@!@ENDMSG 2186 @!@!@\n"
    )
    result = parse_tlc_output(text, properties=["EventuallyLeaderElected"])
    assert result.error_kind is ErrorKind.PROPERTY
    assert result.violated == "EventuallyLeaderElected"
    assert result.seconds == 62.0


def test_config_constants_skip_model_values() -> None:
    cfg = "CONSTANTS\n  Server = {s1, s2}\n  Nil = Nil\n  MaxEpoch = 2\n  Resign <- NoFault\n"
    assert config_constants(cfg) == (
        ("Server", "{s1, s2}"),
        ("MaxEpoch", "2"),
        ("Resign", "<- NoFault"),
    )


def test_write_table_replaces_only_the_marked_section(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("head\n<!-- models:begin -->\nold\n<!-- models:end -->\ntail\n")
    write_table(readme, "| new |")
    assert readme.read_text() == "head\n<!-- models:begin -->\n| new |\n<!-- models:end -->\ntail\n"


@pytest.mark.tlc
def test_table_cli_rewrites_run_rows_and_keeps_the_others(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Specs\n<!-- models:begin -->\n| model | x |\n| --- | --- |\n"
        "| KRaftElection | kept row |\n| KRaftMutantVotedForNotPersisted | stale row |\n"
        "<!-- models:end -->\nafter\n"
    )
    code = main(["table", "--write", str(readme), "--only", "KRaftMutantVotedForNotPersisted"])
    assert code == 0
    text = readme.read_text()
    assert text.startswith("# Specs\n<!-- models:begin -->\n| model | kind | spec |")
    assert text.endswith("<!-- models:end -->\nafter\n")
    assert "| KRaftElection | kept row |" in text
    assert "stale row" not in text
    assert "violates ElectionSafety (expected) |" in text


def test_missing_jar_says_to_run_make_setup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TLA_JAR_PATH", "/nonexistent/tla2tools.jar")
    with pytest.raises(TlcError, match="make setup"):
        find_tla_jar()
