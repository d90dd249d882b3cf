"""The client's reads (kraft.client has the connection, the quorum and appends).

- `read`: Kafka's Fetch with replica id -1, as a consumer: only committed records. The
  Fetch is one a Kafka leader accepts too (last fetched epoch >= 0, the leader's epoch),
  following the leader it names.
- `get`: the private KraftGet API: a key's value in one node's key-value state machine
  (kraft.app.kv), from the committed records that node has applied.
"""

from __future__ import annotations

from dataclasses import dataclass

from kraft.client import Address, ClientError, Connection, error_code
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset, ReplicaKey
from kraft.protocol import ApiKey, MessageDict
from kraft.protocol.client_api import KRAFT_GET_KEY
from kraft.protocol.rpc import KRAFT_VERSIONS, request_to_wire, response_from_wire
from kraft.protocol.values import get_int, get_opt_str, get_str, get_structs
from kraft.records import CorruptRecordError, iter_batches, iter_values

__all__ = ["GetResult", "ReadResult", "get", "read"]

# Answers that name the leader a reader should ask instead (or the epoch to ask in).
_READ_REDIRECTS = frozenset(
    {
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.INVALID_REQUEST,
    }
)


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: tuple[tuple[Offset, bytes | None], ...]
    high_watermark: Offset | None
    next_offset: Offset


@dataclass(frozen=True, slots=True)
class GetResult:
    """A key's value in one node's state machine: `value` is None when the node holds no
    such key; `applied_offset` is where its state machine stands (everything below it
    applied, all of it committed)."""

    key: bytes
    value: bytes | None
    found: bool
    applied_offset: Offset
    node_id: NodeId


async def get(address: Address, key: bytes, timeout_s: float = 5.0) -> GetResult:
    """Ask one node for `key`'s committed value (KraftGet). A follower answers from what it
    has applied, which may lag the leader. Raises ClientError when the node cannot be
    reached or answers with an error."""
    async with await Connection.open(address, timeout_s) as conn:
        version = await conn.version_for(KRAFT_GET_KEY)
        body = await conn.request(KRAFT_GET_KEY, version, {"key": key}, timeout_s)
    error = error_code(body)
    if error is not ErrorCode.NONE:
        message = get_opt_str(body, "error_message")
        raise ClientError(f"{address}: {error.name}" + (f" ({message})" if message else ""), error)
    value = body.get("value")
    return GetResult(
        key,
        value if isinstance(value, bytes) else None,
        bool(body.get("found")),
        Offset(get_int(body, "applied_offset")),
        NodeId(get_int(body, "node_id")),
    )


async def read(
    address: Address,
    from_offset: int = 0,
    *,
    max_bytes: int = 1 << 20,
    to_end: bool = True,
    max_redirects: int = 5,
) -> ReadResult:
    """Committed records from `from_offset` (control records skipped): one Fetch, or, with
    `to_end`, Fetches until the high watermark.

    The Fetch (replica id -1) is one Kafka's KRaft accepts too: it carries a last fetched
    epoch (>= 0) and the leader's epoch, goes to the leader, and only records below the high
    watermark are kept (a Kafka leader also sends uncommitted ones). A kraft node answers it
    from any replica, committed records only. FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
    NOT_LEADER_OR_FOLLOWER and INVALID_REQUEST answers that name a leader are followed (its
    epoch, and its endpoint from Fetch v17's node endpoints), up to `max_redirects` times; a
    diverging epoch (a reader starting mid-log) moves the position back as a follower's
    would, without collecting any record twice."""
    records: list[tuple[Offset, bytes | None]] = []
    wanted = Offset(from_offset)  # the next record to collect
    offset = Offset(from_offset)  # the next offset to fetch
    last_epoch = Epoch(0)
    epoch = Epoch(0)
    hwm: Offset | None = None
    redirects = 0
    target = address
    conn = await Connection.open(target)
    try:
        while True:
            # v13+: KRaft names the topic by id; no higher than our adapter translates.
            lo, hi = KRAFT_VERSIONS[ApiKey.FETCH]
            version = min(await conn.version_for(ApiKey.FETCH, lo=lo), hi)
            req = FetchRequest(
                cluster_id=ClusterId(""),
                replica=ReplicaKey(NodeId(-1)),
                replica_epoch=Epoch(max(epoch, last_epoch)),
                fetch_offset=offset,
                last_fetched_epoch=last_epoch,
                log_start_offset=Offset(-1),
                max_bytes=max_bytes,
            )
            _, v, body = request_to_wire(req, version=version)
            body["cluster_id"] = None  # a consumer does not name the cluster
            answer = await conn.request(ApiKey.FETCH, v, body)
            resp = response_from_wire(ApiKey.FETCH, v, answer)
            assert isinstance(resp, FetchResponse)
            if resp.error in _READ_REDIRECTS and resp.leader_id >= 0 and redirects < max_redirects:
                redirects += 1
                epoch = Epoch(max(epoch, resp.leader_epoch))
                leader = _endpoint_of(answer, resp.leader_id)
                if leader is not None and leader != target:
                    await conn.close()
                    target = leader
                    conn = await Connection.open(target)
                continue
            if resp.error is not ErrorCode.NONE:
                raise ClientError(f"{target}: Fetch at {offset}: {resp.error.name}", resp.error)
            if resp.snapshot_id is not None:
                raise ClientError(
                    f"{target}: the records before {resp.snapshot_id.offset} are only in a "
                    "snapshot; read from a later offset"
                )
            if resp.diverging_epoch is not None and redirects < max_redirects:
                redirects += 1
                offset = Offset(min(offset, resp.diverging_epoch.offset))
                last_epoch = resp.diverging_epoch.epoch
                continue
            hwm = None if resp.high_watermark < 0 else resp.high_watermark
            data = bytes(resp.records)
            try:
                for pos, header in iter_batches(data):
                    if hwm is None or header.last_offset >= hwm:
                        break  # not committed yet (a Kafka leader sends such batches too)
                    if not header.is_control:
                        for off, value in iter_values(data, pos, header):
                            if off >= wanted:
                                records.append((Offset(off), value))
                    offset = Offset(header.next_offset)
                    wanted = Offset(max(wanted, offset))
                    last_epoch = Epoch(header.partition_leader_epoch)
            except CorruptRecordError as e:
                raise ClientError(f"{target}: corrupt records at {offset}: {e}") from None
            if not data or not to_end or hwm is None or offset >= hwm:
                break
    finally:
        await conn.close()
    return ReadResult(tuple(records), hwm, offset)


def _endpoint_of(fetch_answer: MessageDict, node_id: int) -> Address | None:
    """The endpoint of `node_id` among a Fetch v16+ answer's node endpoints."""
    for n in get_structs(fetch_answer, "node_endpoints"):
        if get_int(n, "node_id") == node_id:
            return Address(get_str(n, "host"), get_int(n, "port"))
    return None
