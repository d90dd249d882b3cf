"""Voter changes on the leader (kraft.core.reconfig; KIP-853 as Kafka 4.3's AddVoterHandler,
RemoveVoterHandler and UpdateVoterHandler ship it; KIP-856's rules).

A dynamic quorum {1, 2, 3} (its voter set from the bootstrap checkpoint, kraft.version 1);
node 1 leads. Its epoch starts with LeaderChange, KRaftVersion and Voters at offsets 0-2.
"""

from __future__ import annotations

from replica_harness import CLUSTER, Harness, key, of, sent, stand

from kraft.control_records import (
    Endpoint,
    VoterEntry,
    VotersRecord,
    decode_control_batch,
)
from kraft.core.effects import (
    ActionTaken,
    AppendToLog,
    CheckVoterVersions,
    HighWatermarkMoved,
    Send,
)
from kraft.core.events import ClientAppend, Receive, VoterVersionsChecked
from kraft.core.messages import (
    AddVoterRequest,
    AddVoterResponse,
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    RemoveVoterRequest,
    RemoveVoterResponse,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteResponse,
)
from kraft.core.reconfig import CAUGHT_UP_WITHIN_MS
from kraft.core.vocabulary import Action, ReplicaState
from kraft.core.voter_records import voter_set_of
from kraft.errors import ErrorCode
from kraft.ids import NO_NODE, ClusterId, Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey

S = ReplicaState
ADMIN = NodeId(-1)  # an admin client has no node id
TOKEN = 4242  # the reply token the node chose for the admin request


def _endpoints(n: int, port: int | None = None) -> tuple[Endpoint, ...]:
    return (Endpoint("CONTROLLER", "127.0.0.1", port or 9000 + n),)


def _record(*nodes: int) -> VotersRecord:
    return VotersRecord(
        0,
        tuple(VoterEntry(n, key(n).directory_id, _endpoints(n), 0, 1) for n in nodes),
    )


def _dynamic(node: int = 1, *, elect: bool = True, commit: bool = True) -> Harness:
    stated = ((Offset(-1), voter_set_of(_record(1, 2, 3))),)
    h = Harness(node=node, voters=(), voter_history=stated, request_timeout_ms=2000)
    if elect:
        stand(h)
        for v in (2, 3):
            if h.view.state is S.CANDIDATE:
                h.recv(v, VoteResponse(ErrorCode.NONE, NO_NODE, h.view.epoch, True))
        assert h.view.state is S.LEADER
    if commit:
        _fetch(h, key(2), 3)
        assert h.replica._leader is not None and h.replica._leader.hwm == 3
    return h


def _fetch(h: Harness, replica: ReplicaKey, offset: int) -> list[object]:
    epoch = h.view.epoch
    last = 0 if offset == 0 else int(epoch)
    req = FetchRequest(CLUSTER, replica, epoch, Offset(offset), Epoch(last), Offset(0))
    return list(h.recv(int(replica.id), req))


def _ask(h: Harness, request: object) -> list[object]:
    return list(h.step(Receive(h.now, ADMIN, request, reply_to=TOKEN)))  # type: ignore[arg-type]


def _answers(effects: list[object], cls: type) -> list[object]:
    return [
        e.message
        for e in effects
        if isinstance(e, Send) and isinstance(e.message, cls) and e.reply_to == TOKEN
    ]


def _add(n: int, **kw: object) -> AddVoterRequest:
    return AddVoterRequest(CLUSTER, key(n), _endpoints(n), **kw)  # type: ignore[arg-type]


def _checked(h: Harness, n: int, span: tuple[int, int] | None = (0, 1)) -> list[object]:
    return list(h.step(VoterVersionsChecked(h.now, NodeId(n), ErrorCode.NONE, span)))


def _update(epoch: int, n: int, lo: int, hi: int) -> UpdateVoterRequest:
    return UpdateVoterRequest(CLUSTER, Epoch(epoch), key(n), _endpoints(n), lo, hi)


def _voter_ids(h: Harness) -> set[int]:
    return {int(v.id) for v in h.replica._voters}


def _appended_voters(effects: list[object]) -> list[VotersRecord]:
    out = []
    for e in effects:
        if isinstance(e, AppendToLog):
            _, records = decode_control_batch(bytes(e.data))
            out += [r for r in records if isinstance(r, VotersRecord)]
    return out


def test_a_change_before_the_epochs_leader_change_commits_is_refused() -> None:
    """Ongaro's bug: a leader must not change the voter set before a record of its own epoch
    (its LeaderChange) has committed (Kafka: no HWM yet -> REQUEST_TIMED_OUT)."""
    h = _dynamic(commit=False)
    end = h.log.end_offset
    for request, answer in (
        (_add(4), AddVoterResponse),
        (RemoveVoterRequest(CLUSTER, key(3)), RemoveVoterResponse),
    ):
        [resp] = _answers(_ask(h, request), answer)
        assert resp.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
        assert "establish HWM" in (resp.message or "")  # type: ignore[attr-defined]
    assert h.log.end_offset == end and _voter_ids(h) == {1, 2, 3}
    # Once the epoch's records commit, the same change goes ahead.
    _fetch(h, key(2), 3)
    effects = _ask(h, RemoveVoterRequest(CLUSTER, key(3)))
    assert _appended_voters(effects) == [_record(1, 2)]
    assert ActionTaken(Action.REMOVE_VOTER, key(3)) in effects  # it names the voter removed


def test_add_voter_probes_appends_takes_effect_at_once_and_answers_after_commit() -> None:
    h = _dynamic()
    _fetch(h, key(4), 3)  # node 4 fetches as an observer, caught up
    effects = _ask(h, _add(4))
    assert of(effects, CheckVoterVersions) == [CheckVoterVersions(key(4), _endpoints(4))]
    assert not _answers(effects, AddVoterResponse) and not of(effects, AppendToLog)
    effects = _checked(h, 4)
    assert _appended_voters(effects) == [_record(1, 2, 3, 4)]
    assert ActionTaken(Action.ADD_VOTER, key(4)) in effects  # it names the voter added
    # In force when appended (KIP-856): four voters, a majority is three.
    assert _voter_ids(h) == {1, 2, 3, 4}
    assert not _answers(effects, AddVoterResponse)
    _fetch(h, key(2), 4)  # the leader and 2 of 4: not yet a majority
    assert h.replica._leader.hwm != 4  # type: ignore[union-attr]
    effects = _fetch(h, key(4), 4)
    [resp] = _answers(effects, AddVoterResponse)
    assert resp == AddVoterResponse(ErrorCode.NONE)
    # The answer follows the HWM move that committed the record.
    moved = next(i for i, e in enumerate(effects) if isinstance(e, HighWatermarkMoved))
    answered = next(i for i, e in enumerate(effects) if isinstance(e, Send) and e.reply_to == TOKEN)
    assert moved < answered


def test_two_uncommitted_changes_are_refused() -> None:
    h = _dynamic()
    _ask(h, RemoveVoterRequest(CLUSTER, key(3)))
    # The first is pending: Kafka's isOperationPending.
    [resp] = _answers(_ask(h, _add(4)), AddVoterResponse)
    assert resp.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    assert "previous" in (resp.message or "")  # type: ignore[attr-defined]
    [again] = _answers(_ask(h, RemoveVoterRequest(CLUSTER, key(2))), RemoveVoterResponse)
    assert again.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    assert _voter_ids(h) == {1, 2}
    # An add still probing its new voter (no record yet) is pending too.
    probing = _dynamic()
    assert of(_ask(probing, _add(4)), CheckVoterVersions)
    [busy] = _answers(_ask(probing, RemoveVoterRequest(CLUSTER, key(3))), RemoveVoterResponse)
    assert busy.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    assert _voter_ids(probing) == {1, 2, 3}
    # An update is answered at append and leaves no pending change, but its record must
    # commit before the next change (Kafka: the latest Voters record at or past the HWM).
    h2 = _dynamic()
    upd = UpdateVoterRequest(CLUSTER, h2.view.epoch, key(2), _endpoints(2, 9999), 0, 1)
    [ok] = sent(h2.recv(2, upd), UpdateVoterResponse)
    assert ok[1].error is ErrorCode.NONE
    [late] = _answers(_ask(h2, RemoveVoterRequest(CLUSTER, key(3))), RemoveVoterResponse)
    assert late.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    assert "commit the latest voter change" in (late.message or "")  # type: ignore[attr-defined]


def test_add_voter_refusals_in_kafkas_order() -> None:
    h = _dynamic()
    other_cluster = AddVoterRequest(ClusterId("other"), key(4), _endpoints(4))
    no_directory = AddVoterRequest(CLUSTER, ReplicaKey(NodeId(4)), _endpoints(4))
    no_default_listener = AddVoterRequest(CLUSTER, key(4), (Endpoint("OTHER", "h", 1),))
    cases: list[tuple[object, ErrorCode]] = [
        (other_cluster, ErrorCode.INCONSISTENT_CLUSTER_ID),
        (no_directory, ErrorCode.INVALID_REQUEST),
        (no_default_listener, ErrorCode.INVALID_REQUEST),
        (_add(2), ErrorCode.DUPLICATE_VOTER),
    ]  # fmt: skip
    for request, error in cases:
        [resp] = _answers(_ask(h, request), AddVoterResponse)
        assert resp.error is error, request  # type: ignore[attr-defined]
    # A follower is not the leader.
    f = _dynamic(2, elect=False, commit=False)
    [resp] = _answers(_ask(f, _add(4)), AddVoterResponse)
    assert resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]
    # kraft.version 0 (a static voter set) cannot change: Kafka's UNSUPPORTED_VERSION.
    static = Harness(voters=(1, 2, 3))
    stand(static)
    static.recv(2, VoteResponse(ErrorCode.NONE, NO_NODE, static.view.epoch, True))
    _fetch(static, key(2), 1)
    [resp] = _answers(_ask(static, _add(4)), AddVoterResponse)
    assert resp.error is ErrorCode.UNSUPPORTED_VERSION  # type: ignore[attr-defined]
    assert "kraft.version feature is 0" in (resp.message or "")  # type: ignore[attr-defined]


def test_a_new_voter_must_support_our_version_and_be_caught_up() -> None:
    """Kafka's handleApiVersionsResponse: an ApiVersions error times out, a kraft.version
    range without ours is INVALID_REQUEST, a replica not fetching (or last fetched over an
    hour ago) is lagging: REQUEST_TIMED_OUT. Nothing is appended."""
    h = _dynamic()
    end = h.log.end_offset
    _ask(h, _add(4))
    effects = list(h.step(VoterVersionsChecked(h.now, NodeId(4), ErrorCode.REQUEST_TIMED_OUT)))
    assert _answers(effects, AddVoterResponse)[0].error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    _ask(h, _add(4))
    [resp] = _answers(_checked(h, 4, (0, 0)), AddVoterResponse)
    assert resp.error is ErrorCode.INVALID_REQUEST  # type: ignore[attr-defined]
    _ask(h, _add(4))
    [resp] = _answers(_checked(h, 4), AddVoterResponse)
    assert resp.error is ErrorCode.REQUEST_TIMED_OUT and "lagging" in resp.message  # type: ignore[attr-defined]
    # Fetching with another directory id is another replica: still not caught up.
    _fetch(h, ReplicaKey(NodeId(4), key(9).directory_id), 3)
    _ask(h, _add(4))
    [resp] = _answers(_checked(h, 4), AddVoterResponse)
    assert resp.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    # Caught up an hour ago is too long ago.
    _fetch(h, key(4), 3)
    h.now += CAUGHT_UP_WITHIN_MS  # the voters fetch meanwhile; node 4 does not
    _fetch(h, key(2), 3)
    _fetch(h, key(3), 3)
    assert h.view.state is S.LEADER
    _ask(h, _add(4))
    [resp] = _answers(_checked(h, 4), AddVoterResponse)
    assert resp.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    assert h.log.end_offset == end and _voter_ids(h) == {1, 2, 3}


def test_remove_needs_the_exact_voter_key_and_never_empties_the_set() -> None:
    h = _dynamic()
    wrong_disk = ReplicaKey(NodeId(3), key(9).directory_id)
    [resp] = _answers(_ask(h, RemoveVoterRequest(CLUSTER, wrong_disk)), RemoveVoterResponse)
    assert resp.error is ErrorCode.VOTER_NOT_FOUND  # type: ignore[attr-defined]
    [resp] = _answers(_ask(h, RemoveVoterRequest(CLUSTER, key(7))), RemoveVoterResponse)
    assert resp.error is ErrorCode.VOTER_NOT_FOUND  # type: ignore[attr-defined]
    assert _voter_ids(h) == {1, 2, 3}


def test_a_removed_leader_does_not_count_itself_then_resigns() -> None:
    """KIP-856: the leader removing itself keeps leading until the change commits, without
    counting its own log toward the HWM, then resigns with EndQuorumEpoch; the HWM never
    decreases across the change."""
    h = _dynamic()
    hwm_before = h.replica._leader.hwm  # type: ignore[union-attr]
    effects = _ask(h, RemoveVoterRequest(CLUSTER, key(1)))
    assert _appended_voters(effects) == [_record(2, 3)]
    assert not h.replica.is_voter and h.view.state is S.LEADER
    # The new set {2, 3}: a majority is both; the leader's own end does not count.
    _fetch(h, key(2), 4)
    assert h.replica._leader.hwm == hwm_before  # type: ignore[union-attr]
    assert h.view.high_watermark == hwm_before
    effects = _fetch(h, key(3), 4)
    assert h.replica._leader.hwm == 4  # type: ignore[union-attr]
    [resp] = _answers(effects, RemoveVoterResponse)
    assert resp == RemoveVoterResponse(ErrorCode.NONE)
    assert h.view.state is S.LEADER  # resigns at its next poll, as Kafka's pollLeader
    effects = list(h.tick())
    assert h.view.state is S.RESIGNED
    ends = sent(effects, EndQuorumEpochRequest)
    assert {dst for dst, _ in ends} == {2, 3}


def test_the_voter_set_is_reverted_when_the_change_is_truncated_away() -> None:
    """A leader's uncommitted Voters record is truncated by the next leader: the voter set it
    set is undone (KIP-856), and the change is answered with an error (the record is lost)."""
    h = _dynamic()
    epoch = h.view.epoch
    _ask(h, RemoveVoterRequest(CLUSTER, key(3)))
    assert _voter_ids(h) == {1, 2}
    # Node 2 wins the next epoch without the record and tells us.
    new = Epoch(epoch + 1)
    effects = list(h.recv(2, BeginQuorumEpochRequest(CLUSTER, NodeId(2), new, voter=key(1))))
    assert h.view.state is S.FOLLOWER
    # Stepping down answers the pending change at once (Kafka's LeaderState.close).
    [resp] = _answers(effects, RemoveVoterResponse)
    assert resp.error is ErrorCode.NOT_LEADER_OR_FOLLOWER  # type: ignore[attr-defined]
    [(_, fetch)] = sent(effects, FetchRequest)
    assert fetch.fetch_offset == 4
    diverge = FetchResponse(
        ErrorCode.NONE,
        NodeId(2),
        new,
        Offset(3),
        Offset(0),
        diverging_epoch=OffsetAndEpoch(epoch, Offset(3)),
    )
    effects = list(h.recv(2, diverge, fetch))
    assert _voter_ids(h) == {1, 2, 3}
    assert not _answers(effects, RemoveVoterResponse)  # answered once only


def test_a_pending_change_times_out_and_frees_the_slot() -> None:
    h = _dynamic()
    _ask(h, _add(4))  # the probe is never answered
    effects = list(h.tick(h.now + 2000))
    [resp] = _answers(effects, AddVoterResponse)
    assert resp.error is ErrorCode.REQUEST_TIMED_OUT  # type: ignore[attr-defined]
    _fetch(h, key(2), 3)
    assert of(_ask(h, _add(4)), CheckVoterVersions)  # accepted: nothing pending now
    # A late answer to the first probe is no answer to the second: still one probe pending.
    assert not _answers(
        list(h.step(VoterVersionsChecked(h.now, NodeId(5), ErrorCode.NONE, (0, 1)))),
        AddVoterResponse,
    )


def test_update_voter_writes_the_new_endpoints_and_answers_at_once() -> None:
    h = _dynamic()
    epoch = h.view.epoch
    upd = UpdateVoterRequest(CLUSTER, epoch, key(2), _endpoints(2, 9999), 0, 1)
    effects = h.recv(2, upd)
    [(_, resp)] = sent(effects, UpdateVoterResponse)
    assert resp == UpdateVoterResponse(ErrorCode.NONE, NodeId(1), epoch)
    [record] = _appended_voters(effects)
    assert [v.endpoints for v in record.voters if v.voter_id == 2] == [_endpoints(2, 9999)]
    assert h.replica._voters.record == record
    cases = [
        (_update(epoch - 1, 2, 0, 1), ErrorCode.FENCED_LEADER_EPOCH),
        (_update(epoch + 1, 2, 0, 1), ErrorCode.UNKNOWN_LEADER_EPOCH),
        (_update(epoch, 2, 2, 1), ErrorCode.INVALID_REQUEST),
    ]
    for request, error in cases:
        [(_, answer)] = sent(h.recv(2, request), UpdateVoterResponse)
        assert answer.error is error
    h2 = _dynamic()
    for request, error in (
        (_update(epoch, 2, 0, 0), ErrorCode.INVALID_REQUEST),  # kraft.version 1 unsupported
        (_update(epoch, 7, 0, 1), ErrorCode.VOTER_NOT_FOUND),
    ):
        [(_, answer)] = sent(h2.recv(2, request), UpdateVoterResponse)
        assert answer.error is error


def test_update_voter_at_kraft_version_0_keeps_nothing() -> None:
    static = Harness(voters=(1, 2, 3))
    stand(static)
    static.recv(2, VoteResponse(ErrorCode.NONE, NO_NODE, static.view.epoch, True))
    _fetch(static, key(2), 1)
    end = static.log.end_offset
    epoch = static.view.epoch
    upd = UpdateVoterRequest(CLUSTER, epoch, key(2), _endpoints(2), 0, 1)
    [(_, ok)] = sent(static.recv(2, upd), UpdateVoterResponse)
    assert ok.error is ErrorCode.NONE and static.log.end_offset == end
    unknown = UpdateVoterRequest(CLUSTER, epoch, key(7), _endpoints(7), 0, 1)
    [(_, no)] = sent(static.recv(7, unknown), UpdateVoterResponse)
    assert no.error is ErrorCode.VOTER_NOT_FOUND


def test_the_high_watermark_never_decreases_across_a_change() -> None:
    """KIP-856: removing an up-to-date voter while another lags leaves a majority of the new
    set behind the HWM; the leader keeps its HWM (and reports no lower one) until the new
    majority passes it."""
    h = _dynamic()
    h.step(ClientAppend(h.now, ((b"k", b"v"),) * 5, request_id=1))
    end = int(h.log.end_offset)
    _fetch(h, key(2), end)  # node 2 is up to date, node 3 lags at 3
    hwm = h.view.high_watermark
    assert hwm == end
    _ask(h, RemoveVoterRequest(CLUSTER, key(2)))
    assert _voter_ids(h) == {1, 3}
    assert h.view.high_watermark == hwm
    [(_, answer)] = sent(_fetch(h, key(3), 3), FetchResponse)
    assert answer.high_watermark == hwm  # {1, 3} reached only 3: not reported
    assert h.replica._leader.hwm == hwm  # type: ignore[union-attr]
    _fetch(h, key(3), end + 1)  # node 3 has the Voters record too: the change commits
    assert h.view.high_watermark == end + 1


def test_refusals_name_voters_as_kafka_does() -> None:
    """Kafka's tool prints the leader's error message: a voter as Kafka's ReplicaKey prints
    itself, `ReplicaKey(id=N, directoryId=<base64>)`, the voter set as a list of those (Kafka
    4.3.1's text, kafka-metadata-quorum against a Kafka leader; the set in the order of
    Kafka's HashSet, kraft.core.java_order, which for these three keys is their id order)."""
    from kraft.protocol import uuid_to_base64

    def text(n: int) -> str:
        return f"ReplicaKey(id={n}, directoryId={uuid_to_base64(key(n).directory_id)})"

    voters = f"[{text(1)}, {text(2)}, {text(3)}]"
    h = _dynamic()
    [dup] = _answers(_ask(h, _add(2)), AddVoterResponse)
    assert dup == AddVoterResponse(
        ErrorCode.DUPLICATE_VOTER,
        f"The voter id for {text(2)} is already part of the set of voters {voters}.",
    )
    [missing] = _answers(_ask(h, RemoveVoterRequest(CLUSTER, key(7))), RemoveVoterResponse)
    assert missing == RemoveVoterResponse(
        ErrorCode.VOTER_NOT_FOUND, f"Cannot remove voter {text(7)} from the set of voters {voters}"
    )


def test_a_voter_added_back_takes_its_place_in_id_order() -> None:
    """Kafka's VoterSet is a HashMap by id and its Voters record lists that map's values:
    ids below the table's size in ascending order, not the new voter last. {1, 2, 3} less 2,
    then 2 added back, is written (1, 2, 3), so every describe lists 1, 2, 3 again."""
    h = _dynamic()
    assert _appended_voters(_ask(h, RemoveVoterRequest(CLUSTER, key(2)))) == [_record(1, 3)]
    _fetch(h, key(3), 4)  # commits the removal
    _fetch(h, key(2), 4)  # node 2 fetches on, an observer now
    _ask(h, _add(2))
    assert _appended_voters(_checked(h, 2)) == [_record(1, 2, 3)]
    assert [v.id for v in h.replica._voters] == [1, 2, 3]
