"""kraft.protocol.rpc: core RPC dataclasses <-> Kafka wire messages for __cluster_metadata-0.

Round trips go all the way through bytes: core -> wire dict -> encode_*_payload -> decode ->
wire dict -> core, for every message type at every version the adapter translates. Where an
older version lacks a field (directory ids before KIP-853), the expected value is the message
"as that version carries it".
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from kraft.errors import ErrorCode
from kraft.ids import (
    NO_DIRECTORY,
    NO_EPOCH,
    NO_NODE,
    ClusterId,
    DirectoryId,
    Epoch,
    NodeId,
    Offset,
    OffsetAndEpoch,
    ReplicaKey,
)
from kraft.protocol import (
    METADATA_TOPIC_ID,
    SUPPORTED_APIS,
    ApiKey,
    MessageDict,
    ProtocolError,
    RequestHeader,
    decode_request,
    decode_request_payload,
    decode_response_payload,
    encode_request,
    encode_request_payload,
    encode_response_payload,
)
from kraft.protocol.rpc import (
    KRAFT_VERSIONS,
    PREFERRED_VERSIONS,
    InvalidWireResponseError,
    Listener,
    UntranslatableVersionError,
    WireTranslationError,
    describe_quorum_request,
    error_response,
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)

I32 = st.integers(-(2**31), 2**31 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
NAT32 = st.integers(0, 2**31 - 1)
NAT64 = st.integers(0, 2**63 - 1)
node_ids = I32.map(NodeId)
epochs = I32.map(Epoch)
offsets = I64.map(Offset)
cluster_ids = st.text(max_size=24).map(ClusterId)
dirs = st.uuids().map(DirectoryId) | st.just(NO_DIRECTORY)
replicas = st.builds(ReplicaKey, node_ids, dirs)
# A voter key travels as voter_id >= 0 (a negative id means "no voter key", KIP-853).
voters = st.none() | st.builds(ReplicaKey, NAT32.map(NodeId), dirs)
positions = st.builds(OffsetAndEpoch, NAT32.map(Epoch), NAT64.map(Offset))
partition_errors = st.sampled_from(
    [e for e in ErrorCode if e is not ErrorCode.INCONSISTENT_CLUSTER_ID]
)
payload = st.binary(max_size=64)

REQUESTS: dict[ApiKey, st.SearchStrategy[Request]] = {
    ApiKey.VOTE: st.builds(VoteRequest, cluster_ids, replicas, epochs, epochs, offsets, voters),
    ApiKey.BEGIN_QUORUM_EPOCH: st.builds(
        BeginQuorumEpochRequest, cluster_ids, node_ids, epochs, voters
    ),
    ApiKey.END_QUORUM_EPOCH: st.builds(
        EndQuorumEpochRequest,
        cluster_ids,
        node_ids,
        epochs,
        st.lists(node_ids, max_size=4).map(tuple),
    ),
    ApiKey.FETCH: st.builds(
        FetchRequest, cluster_ids, replicas, epochs, offsets, epochs, offsets, I32, I32
    ),
    ApiKey.FETCH_SNAPSHOT: st.builds(
        FetchSnapshotRequest,
        cluster_ids,
        replicas,
        epochs,
        st.builds(OffsetAndEpoch, epochs, offsets),
        I64,
        I32,
    ),
}

RESPONSES: dict[ApiKey, st.SearchStrategy[Response]] = {
    ApiKey.VOTE: st.builds(VoteResponse, partition_errors, node_ids, epochs, st.booleans()),
    ApiKey.BEGIN_QUORUM_EPOCH: st.builds(
        BeginQuorumEpochResponse, partition_errors, node_ids, epochs
    ),
    ApiKey.END_QUORUM_EPOCH: st.builds(EndQuorumEpochResponse, partition_errors, node_ids, epochs),
    ApiKey.FETCH: st.builds(
        FetchResponse,
        partition_errors,
        node_ids,
        epochs,
        offsets,
        offsets,
        st.none() | positions,
        st.none() | positions,
        payload,
    ),
    ApiKey.FETCH_SNAPSHOT: st.builds(
        FetchSnapshotResponse,
        partition_errors,
        node_ids,
        epochs,
        st.builds(OffsetAndEpoch, epochs, offsets),
        I64,
        I64,
        payload,
    ),
}


def versions(key: ApiKey) -> list[int]:
    lo, hi = KRAFT_VERSIONS[key]
    return list(range(lo, hi + 1))


CASES = [(key, v) for key in REQUESTS for v in versions(key)]


def carried_request(msg: Request, version: int) -> Request:
    """The request as a peer at `version` receives it: pre-KIP-853 versions drop directory ids
    and the voter key."""
    if isinstance(msg, VoteRequest) and version == 0:
        return dataclasses.replace(msg, candidate=ReplicaKey(msg.candidate.id), voter=None)
    if isinstance(msg, BeginQuorumEpochRequest) and version == 0:
        return dataclasses.replace(msg, voter=None)
    if isinstance(msg, FetchRequest) and version < 17:
        return dataclasses.replace(msg, replica=ReplicaKey(msg.replica.id))
    if isinstance(msg, FetchSnapshotRequest) and version == 0:
        return dataclasses.replace(msg, replica=ReplicaKey(msg.replica.id))
    return msg


def request_via_bytes(msg: Request, version: int) -> tuple[Request, MessageDict]:
    key, v, body = request_to_wire(msg, version=version)
    assert (key, v) == (type_key(msg), version)
    wire = encode_request_payload(RequestHeader(key, v, 7, "kraft"), body)
    header, decoded = decode_request_payload(wire)
    assert (header.api_key, header.api_version) == (key, v)
    return request_from_wire(key, v, decoded), decoded


def type_key(msg: Request | Response) -> ApiKey:
    return {
        VoteRequest: ApiKey.VOTE,
        BeginQuorumEpochRequest: ApiKey.BEGIN_QUORUM_EPOCH,
        EndQuorumEpochRequest: ApiKey.END_QUORUM_EPOCH,
        FetchRequest: ApiKey.FETCH,
        FetchSnapshotRequest: ApiKey.FETCH_SNAPSHOT,
    }[type(msg)]  # type: ignore[index]


def response_via_bytes(msg: Response, key: ApiKey, version: int) -> tuple[Response, MessageDict]:
    body = response_to_wire(msg, key, version)
    wire = encode_response_payload(key, version, 9, body)
    correlation_id, decoded = decode_response_payload(key, version, wire)
    assert correlation_id == 9
    return response_from_wire(key, version, decoded), decoded


# --- versions -----------------------------------------------------------------------------


def test_preferred_versions_are_the_newest_the_codec_supports() -> None:
    for key, v in PREFERRED_VERSIONS.items():
        assert v == SUPPORTED_APIS[key][1]
    assert PREFERRED_VERSIONS[ApiKey.FETCH] == 17
    assert PREFERRED_VERSIONS[ApiKey.VOTE] == 2


# --- round trips --------------------------------------------------------------------------


@pytest.mark.parametrize(("key", "version"), CASES)
def test_request_round_trip_through_bytes(key: ApiKey, version: int) -> None:
    @settings(max_examples=30)
    @given(REQUESTS[key])
    def check(msg: Request) -> None:
        back, _ = request_via_bytes(msg, version)
        assert back == carried_request(msg, version)

    check()


@pytest.mark.parametrize(("key", "version"), CASES)
def test_response_round_trip_through_bytes(key: ApiKey, version: int) -> None:
    @settings(max_examples=30)
    @given(RESPONSES[key])
    def check(msg: Response) -> None:
        back, _ = response_via_bytes(msg, key, version)
        assert back == msg
        # records and chunks are excluded from dataclass equality; compare them here.
        if isinstance(msg, FetchResponse):
            assert isinstance(back, FetchResponse)
            assert bytes(back.records) == bytes(msg.records)
        if isinstance(msg, FetchSnapshotResponse):
            assert isinstance(back, FetchSnapshotResponse)
            assert back.chunk == msg.chunk

    check()


def test_request_defaults_to_preferred_version() -> None:
    msg = VoteRequest(ClusterId("c"), ReplicaKey(NodeId(1)), Epoch(2), Epoch(1), Offset(5))
    assert request_to_wire(msg)[:2] == (ApiKey.VOTE, 2)


# --- golden bytes -------------------------------------------------------------------------


def hx(*parts: str) -> bytes:
    return bytes.fromhex("".join(parts).replace(" ", ""))


def test_vote_request_golden_bytes() -> None:
    """Vote v1 (flexible): compact strings are uvarint(len+1) then bytes; every struct ends with
    an empty tagged-field section (00). The candidate's epoch and id travel as replica_epoch and
    replica_id, the KIP-853 destination as voter_id + voter_directory_id."""
    cand_dir = DirectoryId(uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"))
    voter_dir = DirectoryId(uuid.UUID("ffeeddcc-bbaa-9988-7766-554433221100"))
    msg = VoteRequest(
        cluster_id=ClusterId("abc"),
        candidate=ReplicaKey(NodeId(1), cand_dir),
        candidate_epoch=Epoch(5),
        last_epoch=Epoch(4),
        last_end_offset=Offset(100),
        voter=ReplicaKey(NodeId(2), voter_dir),
    )
    key, version, body = request_to_wire(msg, version=1)
    wire = encode_request_payload(RequestHeader(key, version, 7, None), body)
    assert wire == hx(
        "0034 0001 00000007 ffff 00",  # header v2: key 52, v1, correlation 7, null client, tags
        "04 616263",  # cluster_id "abc"
        "00000002",  # voter_id 2
        "02",  # topics: one
        "13",
        b"__cluster_metadata".hex(),  # topic_name (18 chars)
        "02",  # partitions: one
        "00000000",  # partition_index 0
        "00000005",  # replica_epoch = candidate epoch 5
        "00000001",  # replica_id = candidate id 1
        "00112233445566778899aabbccddeeff",  # replica_directory_id
        "ffeeddccbbaa99887766554433221100",  # voter_directory_id
        "00000004",  # last_offset_epoch 4
        "0000000000000064",  # last_offset 100
        "00 00 00",  # tagged fields: partition, topic, body
    )


# --- top-level vs partition-level errors --------------------------------------------------


@pytest.mark.parametrize("key", list(RESPONSES))
def test_inconsistent_cluster_id_is_a_top_level_error(key: ApiKey) -> None:
    """Kafka's KRaft answers a request from another cluster with only the top-level error."""
    version = PREFERRED_VERSIONS[key]
    base = {
        ApiKey.VOTE: VoteResponse(ErrorCode.NONE, NodeId(3), Epoch(7), True),
        ApiKey.BEGIN_QUORUM_EPOCH: BeginQuorumEpochResponse(ErrorCode.NONE, NodeId(3), Epoch(7)),
        ApiKey.END_QUORUM_EPOCH: EndQuorumEpochResponse(ErrorCode.NONE, NodeId(3), Epoch(7)),
        ApiKey.FETCH: FetchResponse(ErrorCode.NONE, NodeId(3), Epoch(7), Offset(4), Offset(0)),
        ApiKey.FETCH_SNAPSHOT: FetchSnapshotResponse(
            ErrorCode.NONE, NodeId(3), Epoch(7), OffsetAndEpoch(Epoch(1), Offset(9)), 10, 0
        ),
    }[key]
    msg = dataclasses.replace(base, error=ErrorCode.INCONSISTENT_CLUSTER_ID)
    back, decoded = response_via_bytes(msg, key, version)
    assert decoded["error_code"] == ErrorCode.INCONSISTENT_CLUSTER_ID
    assert decoded.get("topics", decoded.get("responses")) == []
    assert back.error is ErrorCode.INCONSISTENT_CLUSTER_ID
    assert (back.leader_id, back.leader_epoch) == (NO_NODE, NO_EPOCH)


def test_partition_error_keeps_leader_piggy_backed() -> None:
    msg = FetchResponse(ErrorCode.FENCED_LEADER_EPOCH, NodeId(2), Epoch(9), Offset(-1), Offset(0))
    back, decoded = response_via_bytes(msg, ApiKey.FETCH, 17)
    assert decoded["error_code"] == 0
    part = decoded["responses"][0]["partitions"][0]  # type: ignore[index]
    assert part["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    assert part["current_leader"] == {"leader_id": 2, "leader_epoch": 9}
    assert back == msg


@pytest.mark.parametrize(
    ("key", "version"),
    [(k, v) for k in RESPONSES for v in range(SUPPORTED_APIS[k][0], SUPPORTED_APIS[k][1] + 1)],
)
def test_error_response_encodes_and_reads_back(key: ApiKey, version: int) -> None:
    body = error_response(key, version, ErrorCode.INVALID_REQUEST)
    wire = encode_response_payload(key, version, 1, body)
    _, decoded = decode_response_payload(key, version, wire)
    if key is ApiKey.FETCH and version < 7:
        # No top-level error_code before Fetch v7: it rides on the partition.
        part = decoded["responses"][0]["partitions"][0]  # type: ignore[index]
        assert part["error_code"] == ErrorCode.INVALID_REQUEST
        return
    assert decoded["error_code"] == ErrorCode.INVALID_REQUEST
    if version >= KRAFT_VERSIONS[key][0]:
        back = response_from_wire(key, version, decoded)
        assert back.error is ErrorCode.INVALID_REQUEST
        assert back.leader_id == NO_NODE


@pytest.mark.parametrize(
    "key", [ApiKey.API_VERSIONS, ApiKey.DESCRIBE_QUORUM, ApiKey.ADD_RAFT_VOTER]
)
def test_error_response_for_other_apis(key: ApiKey) -> None:
    version = SUPPORTED_APIS[key][1]
    body = error_response(key, version, ErrorCode.UNSUPPORTED_VERSION)
    _, decoded = decode_response_payload(
        key, version, encode_response_payload(key, version, 1, body)
    )
    assert decoded["error_code"] == ErrorCode.UNSUPPORTED_VERSION


def test_unknown_partition_error_code_reads_as_unknown_server_error() -> None:
    body = response_to_wire(
        VoteResponse(ErrorCode.NONE, NodeId(1), Epoch(1), False), ApiKey.VOTE, 2
    )
    body["topics"][0]["partitions"][0]["error_code"] = 9999  # type: ignore[index]
    assert response_from_wire(ApiKey.VOTE, 2, body).error is ErrorCode.UNKNOWN_SERVER_ERROR


# --- refusing requests --------------------------------------------------------------------


def _vote_body() -> MessageDict:
    msg = VoteRequest(ClusterId("c"), ReplicaKey(NodeId(1)), Epoch(2), Epoch(1), Offset(5))
    return request_to_wire(msg, version=2)[2]


def _fetch_body(version: int = 17) -> MessageDict:
    msg = FetchRequest(
        ClusterId("c"), ReplicaKey(NodeId(4)), Epoch(3), Offset(10), Epoch(2), Offset(0)
    )
    return request_to_wire(msg, version=version)[2]


def _expect_invalid(key: ApiKey, version: int, body: MessageDict) -> WireTranslationError:
    with pytest.raises(WireTranslationError) as info:
        request_from_wire(key, version, body)
    assert isinstance(info.value, ProtocolError)
    assert info.value.error_code is ErrorCode.INVALID_REQUEST
    return info.value


def test_vote_for_another_topic_is_invalid_request() -> None:
    body = _vote_body()
    body["topics"][0]["topic_name"] = "other"  # type: ignore[index]
    _expect_invalid(ApiKey.VOTE, 2, body)


def test_vote_for_another_partition_is_invalid_request() -> None:
    body = _vote_body()
    body["topics"][0]["partitions"][0]["partition_index"] = 1  # type: ignore[index]
    _expect_invalid(ApiKey.VOTE, 2, body)


def test_two_topics_are_invalid_request() -> None:
    body = _vote_body()
    body["topics"] = [body["topics"][0], body["topics"][0]]  # type: ignore[index]
    _expect_invalid(ApiKey.VOTE, 2, body)


def test_fetch_must_name_the_metadata_topic_id() -> None:
    body = _fetch_body()
    body["topics"][0]["topic_id"] = uuid.UUID(int=2)  # type: ignore[index]
    _expect_invalid(ApiKey.FETCH, 17, body)


def test_missing_field_is_invalid_request() -> None:
    body = _vote_body()
    del body["topics"][0]["partitions"][0]["last_offset"]  # type: ignore[union-attr,index]
    _expect_invalid(ApiKey.VOTE, 2, body)


# A Vote v2 request from candidate 1 (no directory) in epoch 2, log at epoch 1 offset 5, to no
# particular voter, as a pre-vote (KIP-996): the flag is the partition's last field.
PRE_VOTE_V2_BYTES = bytes.fromhex(
    "02"
    + b"c".hex()  # cluster_id "c": compact string
    + "ffffffff"  # voter_id -1: no voter key
    + "02"
    + "13"
    + b"__cluster_metadata".hex()  # topics: 1; topic_name
    + "02"  # partitions: 1
    + "00000000"  # partition_index 0
    + "00000002"  # replica_epoch 2
    + "00000001"  # replica_id 1
    + "00" * 16  # replica_directory_id: none
    + "00" * 16  # voter_directory_id: none
    + "00000001"  # last_offset_epoch 1
    + "0000000000000005"  # last_offset 5
    + "01"  # pre_vote true
    + "00"
    + "00"
    + "00"  # tagged fields: partition, topic, request
)


def test_pre_vote_goes_out_as_vote_v2_pre_vote_flag() -> None:
    """KIP-996: "PreVote: whether the request is a PreVote request (not persisted)"; Kafka
    sends it as Vote v2's PreVote field."""
    msg = VoteRequest(
        ClusterId("c"), ReplicaKey(NodeId(1)), Epoch(2), Epoch(1), Offset(5), pre_vote=True
    )
    key, version, body = request_to_wire(msg, version=2)
    assert encode_request(key, version, body) == PRE_VOTE_V2_BYTES


def test_vote_v2_pre_vote_flag_reaches_the_core() -> None:
    body = decode_request(ApiKey.VOTE, 2, PRE_VOTE_V2_BYTES)
    req = request_from_wire(ApiKey.VOTE, 2, body)
    assert isinstance(req, VoteRequest)
    assert req.pre_vote is True
    assert req.candidate_epoch == 2 and req.last_end_offset == 5
    # The same request without the flag is a real vote.
    plain = decode_request(ApiKey.VOTE, 2, PRE_VOTE_V2_BYTES[:-4] + bytes.fromhex("00000000"))
    assert request_from_wire(ApiKey.VOTE, 2, plain) == dataclasses.replace(req, pre_vote=False)


def test_a_pre_vote_cannot_be_sent_below_vote_v2() -> None:
    msg = VoteRequest(
        ClusterId("c"), ReplicaKey(NodeId(1)), Epoch(2), Epoch(1), Offset(5), pre_vote=True
    )
    with pytest.raises(UntranslatableVersionError):
        request_to_wire(msg, version=1)


def test_fetch_below_v13_is_invalid_request() -> None:
    """Fetch before v13 names the topic; Kafka's KRaft matches only the topic id."""
    _expect_invalid(ApiKey.FETCH, 12, {"topics": []})
    msg = FetchRequest(
        ClusterId("c"), ReplicaKey(NodeId(4)), Epoch(3), Offset(10), Epoch(2), Offset(0)
    )
    with pytest.raises(UntranslatableVersionError) as info:
        request_to_wire(msg, version=12)
    assert info.value.error_code is ErrorCode.UNSUPPORTED_VERSION


def test_non_core_api_is_invalid_request() -> None:
    _expect_invalid(ApiKey.DESCRIBE_QUORUM, 0, describe_quorum_request())


def test_absent_cluster_id_needs_the_local_one() -> None:
    """Kafka does not enforce a cluster id the request leaves out (null)."""
    body = _vote_body()
    body["cluster_id"] = None
    _expect_invalid(ApiKey.VOTE, 2, body)
    got = request_from_wire(ApiKey.VOTE, 2, body, local_cluster_id=ClusterId("local"))
    assert got.cluster_id == "local"


def test_response_for_another_partition_is_refused() -> None:
    body = response_to_wire(VoteResponse(ErrorCode.NONE, NodeId(1), Epoch(1), True), ApiKey.VOTE, 1)
    body["topics"][0]["partitions"][0]["partition_index"] = 3  # type: ignore[index]
    with pytest.raises(InvalidWireResponseError):
        response_from_wire(ApiKey.VOTE, 1, body)


def test_half_set_snapshot_id_is_refused() -> None:
    msg = FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(1), Offset(0), Offset(0))
    body = response_to_wire(msg, ApiKey.FETCH, 17)
    body["responses"][0]["partitions"][0]["snapshot_id"] = {"end_offset": 5, "epoch": -1}  # type: ignore[index]
    with pytest.raises(InvalidWireResponseError):
        response_from_wire(ApiKey.FETCH, 17, body)


def test_response_type_must_match_api_key() -> None:
    with pytest.raises(TypeError):
        response_to_wire(VoteResponse(ErrorCode.NONE, NodeId(1), Epoch(1), True), ApiKey.FETCH, 17)


# --- Kafka's field choices ----------------------------------------------------------------


@pytest.mark.parametrize("version", versions(ApiKey.FETCH))
def test_fetch_replica_id_moves_to_replica_state_at_v15(version: int) -> None:
    body = _fetch_body(version)
    state = body["replica_state"]
    assert isinstance(state, dict)
    if version >= 15:
        assert (body["replica_id"], state["replica_id"]) == (-1, 4)
    else:
        assert (body["replica_id"], state["replica_id"]) == (4, -1)
    assert body["topics"][0]["topic_id"] == METADATA_TOPIC_ID  # type: ignore[index]


def test_fetch_records_are_not_copied() -> None:
    records = bytes(range(200))
    msg = FetchResponse(ErrorCode.NONE, NodeId(1), Epoch(1), Offset(0), Offset(0), records=records)
    wire = encode_response_payload(ApiKey.FETCH, 17, 1, response_to_wire(msg, ApiKey.FETCH, 17))
    _, decoded = decode_response_payload(ApiKey.FETCH, 17, wire)
    back = response_from_wire(ApiKey.FETCH, 17, decoded)
    assert isinstance(back, FetchResponse)
    assert isinstance(back.records, memoryview)
    assert back.records.obj is wire  # a view into the received buffer
    assert back.records == records


def test_node_endpoints_name_the_leader_where_the_version_has_them() -> None:
    listener = Listener("CONTROLLER", "10.0.0.3", 9093)
    msg = FetchResponse(ErrorCode.NONE, NodeId(3), Epoch(1), Offset(0), Offset(0))
    v17 = response_to_wire(msg, ApiKey.FETCH, 17, leader_listener=listener)
    assert v17["node_endpoints"] == [{"node_id": 3, "host": "10.0.0.3", "port": 9093, "rack": None}]
    encode_response_payload(ApiKey.FETCH, 17, 1, v17)
    assert response_to_wire(msg, ApiKey.FETCH, 16, leader_listener=listener)["node_endpoints"] == []
    unknown = dataclasses.replace(msg, leader_id=NO_NODE)
    assert (
        response_to_wire(unknown, ApiKey.FETCH, 17, leader_listener=listener)["node_endpoints"]
        == []
    )
    vote = VoteResponse(ErrorCode.NONE, NodeId(3), Epoch(1), False)
    assert response_to_wire(vote, ApiKey.VOTE, 1, leader_listener=listener)["node_endpoints"] == [
        {"node_id": 3, "host": "10.0.0.3", "port": 9093}
    ]


def test_begin_quorum_epoch_carries_leader_endpoints() -> None:
    msg = BeginQuorumEpochRequest(ClusterId("c"), NodeId(1), Epoch(2), ReplicaKey(NodeId(3)))
    listeners = [Listener("CONTROLLER", "h", 1)]
    _, v, body = request_to_wire(msg, listeners=listeners)
    _, decoded = decode_request_payload(
        encode_request_payload(RequestHeader(ApiKey.BEGIN_QUORUM_EPOCH, v, 1), body)
    )
    assert decoded["leader_endpoints"] == [{"name": "CONTROLLER", "host": "h", "port": 1}]


@pytest.mark.parametrize("version", [0, 1])
def test_end_quorum_epoch_successors_by_version(version: int) -> None:
    """v0 lists preferred_successors (ids); v1 preferred_candidates (id + directory)."""
    msg = EndQuorumEpochRequest(ClusterId("c"), NodeId(1), Epoch(2), (NodeId(3), NodeId(2)))
    _, _, body = request_to_wire(msg, version=version)
    wire = encode_request_payload(RequestHeader(ApiKey.END_QUORUM_EPOCH, version, 1), body)
    _, decoded = decode_request_payload(wire)
    part = decoded["topics"][0]["partitions"][0]  # type: ignore[index]
    if version == 0:
        assert part["preferred_successors"] == [3, 2]
        assert part["preferred_candidates"] == []
    else:
        assert [c["candidate_id"] for c in part["preferred_candidates"]] == [3, 2]
    assert request_from_wire(ApiKey.END_QUORUM_EPOCH, version, decoded) == msg
