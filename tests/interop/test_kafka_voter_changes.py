"""`kraft quorum add-controller` / `remove-controller` against a real Apache Kafka 4.3 quorum
(KIP-853): a dynamic Kafka quorum (`kafka-storage format --standalone`) and a second Kafka
controller formatted with `--no-initial-controllers`, started as an observer with
`controller.quorum.bootstrap.servers`. Our command adds it to the Kafka leader's voter set and
removes it again; Kafka's own kafka-metadata-quorum sees each change, and `kraft quorum
describe --status` prints the voters and observers as Kafka's tool prints them. A kraft node
configured with only the bootstrap server finds the Kafka leader and observes; our command
makes it a voter of the Kafka quorum (it follows the Voters record) and removes it again. Six
JVM starts: two formats, two controllers, two runs of Kafka's tool."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
from describe_compare import (
    assert_same_replication,
    assert_same_status,
    observer_ids,
    status_fields,
    voter_ids,
)
from kafka_harness import (
    KRAFT_QUORUM,
    METADATA_QUORUM,
    STORAGE_TOOL,
    KafkaNode,
    Procs,
    kraft_cli,
    ports_for,
    run_tool,
)
from polling import kraft_info, wait_for

from kraft.client import Address
from kraft.client_voters import kraft_version_range
from kraft.cluster import LocalCluster
from kraft.core.java_order import hash_order, replica_key_hash, voter_keys_text
from kraft.errors import ErrorCode
from kraft.ids import DirectoryId, NodeId, ReplicaKey
from kraft.protocol import uuid_from_base64, uuid_to_base64
from kraft.storage.meta_properties import (
    generate_cluster_id,
    generate_directory_id,
    read_meta_properties,
)

pytestmark = pytest.mark.interop


class DynamicKafkaController(KafkaNode):
    """A Kafka controller of a dynamic quorum: `controller.quorum.bootstrap.servers`, no
    static voters; formatted `--standalone` (the first voter) or `--no-initial-controllers`
    (an observer until added)."""

    bootstrap: str = ""

    def properties(self) -> dict[str, str]:
        props = super().properties()
        del props["controller.quorum.voters"]
        props["controller.quorum.bootstrap.servers"] = self.bootstrap
        return props

    def format_dynamic(self, how: str) -> None:
        text = "".join(f"{k}={v}\n" for k, v in self.properties().items())
        self.config_path.write_text(text, encoding="utf-8")
        done = run_tool(
            self.procs.root,
            STORAGE_TOOL,
            ["format", "-t", self.cluster_id, "-c", str(self.config_path), how],
        )
        assert done.returncode == 0, f"StorageTool format failed:\n{done.stdout}\n{done.stderr}"


def _kraft_status(bootstrap: str) -> dict[str, str] | None:
    done = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, "--status")
    return status_fields(done.stdout) if done.returncode == 0 else None


def _same_describe(procs: Procs, bootstrap: str, flag: str) -> str:
    """Kafka's tool, then ours, on the Kafka quorum: the same output but what moves (the
    Kafka leader appends NoOp records: offsets, and times). Kafka's output."""
    theirs = run_tool(
        procs.root, METADATA_QUORUM, ["--bootstrap-controller", bootstrap, "describe", flag]
    )
    assert theirs.returncode == 0, f"{theirs.stdout}\n{theirs.stderr}"
    ours = kraft_cli("quorum", "describe", "--bootstrap", bootstrap, flag)
    assert ours.returncode == 0, ours.stderr
    same = assert_same_status if flag == "--status" else assert_same_replication
    same(ours.stdout, theirs.stdout, moving=True)
    return theirs.stdout


def test_kraft_adds_and_removes_a_kafka_controller_of_a_kafka_quorum(procs: Procs) -> None:
    cluster_id = generate_cluster_id(random.Random())
    ports = ports_for([1, 2])
    bootstrap = f"127.0.0.1:{ports[1]}"
    nodes = {}
    for n in (1, 2):
        k = DynamicKafkaController(procs, n, ports[n], "", cluster_id)
        k.bootstrap = bootstrap
        nodes[n] = k
    nodes[1].format_dynamic("--standalone")
    nodes[2].format_dynamic("--no-initial-controllers")
    directory2 = read_meta_properties(nodes[2].data_dir).directory_id
    for k in nodes.values():
        k.start()

    # Node 2 fetches as an observer of node 1's one-voter quorum.
    fields = wait_for(
        "node 2 as an observer",
        lambda: (f := _kraft_status(bootstrap)) and observer_ids(f) == [2] and f,
        120.0,
    )
    assert voter_ids(fields) == [1]
    # The probe a leader makes of a replica it adds: Kafka's controller supports kraft.version
    # 0 to 1, as a kraft node says it does.
    assert asyncio.run(kraft_version_range(nodes[2].address)) == (ErrorCode.NONE, (0, 1))

    # Bad input: a clear error, exit 2, nothing sent.
    bad = kraft_cli("quorum", "remove-controller", "--bootstrap", bootstrap, "-i", "2", "-d", "x")
    assert bad.returncode == 2 and "--controller-directory-id" in bad.stderr

    added = kraft_cli(
        "quorum",
        "add-controller",
        "--bootstrap-controller",
        bootstrap,
        "--command-config",
        str(nodes[2].config_path),
        timeout_s=90.0,
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == (
        f"Added controller 2 with directory id {uuid_to_base64(directory2)} and endpoints: "
        f"CONTROLLER://127.0.0.1:{ports[2]}"
    )

    # Kafka's tool and ours print the same voters and observers.
    ours = wait_for(
        "the Voters record naming node 2",
        lambda: (f := _kraft_status(bootstrap)) and voter_ids(f) == [1, 2] and f,
        60.0,
    )
    kafka = status_fields(_same_describe(procs, bootstrap, "--status"))
    voters = json.loads(kafka["CurrentVoters"])
    assert {(v["id"], v.get("directoryId")) for v in voters} == {
        (1, uuid_to_base64(read_meta_properties(nodes[1].data_dir).directory_id)),
        (2, uuid_to_base64(directory2)),
    }
    assert {tuple(v["endpoints"]) for v in voters} == {
        (f"CONTROLLER://127.0.0.1:{ports[n]}",) for n in (1, 2)
    }
    assert ours["ClusterId"] == kafka["ClusterId"] == cluster_id

    # Adding it again: Kafka's DUPLICATE_VOTER, exit 1, named.
    again = kraft_cli(
        "quorum",
        "add-voter",
        "--bootstrap",
        bootstrap,
        "--command-config",
        str(nodes[2].config_path),
        "--timeout-ms",
        "10000",
        timeout_s=60.0,
    )
    assert again.returncode == 1 and "DUPLICATE_VOTER" in again.stderr, again.stderr
    # Kafka's text (the voter as its ReplicaKey prints itself), which a kraft leader copies.
    # The voter set as Kafka's HashSet iterates it (kraft.core.java_order's emulation,
    # checked here against Kafka itself).
    node2 = f"ReplicaKey(id=2, directoryId={uuid_to_base64(directory2)})"
    directory1 = read_meta_properties(nodes[1].data_dir).directory_id
    voters12 = voter_keys_text(
        [ReplicaKey(NodeId(1), directory1), ReplicaKey(NodeId(2), directory2)]
    )
    assert f"The voter id for {node2} is already part of the set of voters {voters12}." in (
        again.stderr
    ), again.stderr

    # Removing a voter the leader does not have: Kafka's VOTER_NOT_FOUND, exit 1.
    unknown = kraft_cli(
        "quorum",
        "remove-voter",
        "--bootstrap",
        bootstrap,
        "-i",
        "7",
        "-d",
        uuid_to_base64(directory2),
    )
    assert unknown.returncode == 1 and "VOTER_NOT_FOUND" in unknown.stderr, unknown.stderr
    node7 = f"ReplicaKey(id=7, directoryId={uuid_to_base64(directory2)})"
    assert f"Cannot remove voter {node7} from the set of voters {voters12}" in unknown.stderr

    removed = kraft_cli(
        "quorum",
        "remove-controller",
        "--bootstrap-controller",
        bootstrap,
        "--controller-id",
        "2",
        "--controller-directory-id",
        uuid_to_base64(directory2),
        timeout_s=90.0,
    )
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == (
        f"Removed  KRaft controller 2 with directory id {uuid_to_base64(directory2)}"
    )
    wait_for(
        "node 2 an observer again",
        lambda: (f := _kraft_status(bootstrap)) and voter_ids(f) == [1] and f,
        60.0,
    )
    # Both tools: voter 1, and node 2 an observer again (with its directory id, no endpoints).
    kafka = status_fields(_same_describe(procs, bootstrap, "--status"))
    assert voter_ids(kafka) == [1] and observer_ids(kafka) == [2]
    # A kraft node that knows only the bootstrap server finds the Kafka leader (a Fetch to
    # the bootstrap server names it and its endpoint) and replicates its log as an observer,
    # learning the voter set from the Voters records in it.
    observer = _kraft_observer(procs, cluster_id, bootstrap)
    observer.start()
    kraft3 = observer.addresses[3]
    info = wait_for(
        "the kraft observer to follow the Kafka leader",
        lambda: (
            (i := kraft_info(kraft3)) is not None
            and i.leader_id == 1
            and (i.high_watermark or 0) > 0
            and i
        ),
        60.0,
    )
    assert list(info.voters) == [1] and info.state == "Follower"
    wait_for(
        "the Kafka leader to list the kraft observer",
        lambda: (f := _kraft_status(bootstrap)) and 3 in observer_ids(f),
        60.0,
    )

    # Our command adds the kraft node to the Kafka leader's voters (the leader checks its
    # ApiVersions for kraft.version 1 and that it is caught up): the kraft node becomes a
    # voter when the Voters record naming it arrives, and the Kafka leader's high watermark
    # then needs its fetches. Then it is removed again and observes.
    kraft_dir = read_meta_properties(observer.data_dir(3)).directory_id
    added3 = kraft_cli(
        "quorum",
        "add-controller",
        "--bootstrap-controller",
        bootstrap,
        "--command-config",
        str(observer.config_path(3)),
        timeout_s=90.0,
    )
    assert added3.returncode == 0, added3.stderr
    wait_for(
        "the kraft node to be a voter of the Kafka quorum",
        lambda: (i := kraft_info(kraft3)) is not None and sorted(i.voters) == [1, 3],
        60.0,
    )
    ours = wait_for(
        "both tools to list the kraft voter",
        lambda: (f := _kraft_status(bootstrap)) and voter_ids(f) == [1, 3] and f,
        60.0,
    )
    voter3 = next(v for v in json.loads(ours["CurrentVoters"]) if v["id"] == 3)
    assert voter3 == {
        "id": 3,
        "directoryId": uuid_to_base64(kraft_dir),
        "endpoints": [f"CONTROLLER://{kraft3}"],
    }
    # Both members of the quorum, asked alike, answer alike: DescribeCluster (the Kafka
    # admin client's way to the active controller) and ApiVersions of the KRaft APIs.
    kafka1, kraft_answers = _wire_answers(nodes[1].address), _wire_answers(kraft3)
    # Kafka lists the controllers registered in its metadata (1 and 2, which registered when
    # it started and still runs), kraft the voters (1 and 3: it keeps no registrations);
    # the rest, the active controller and node 1's entry included, is the same.
    theirs, mine = kafka1["describe_cluster"], kraft_answers["describe_cluster"]
    assert isinstance(theirs, dict) and isinstance(mine, dict)
    kafka_brokers, kraft_brokers = theirs.pop("brokers"), mine.pop("brokers")
    assert mine == theirs and theirs["controller_id"] == 1
    assert [b["broker_id"] for b in kafka_brokers] == [1, 2]
    assert [b["broker_id"] for b in kraft_brokers] == [1, 3]
    assert kraft_brokers[0] == kafka_brokers[0]
    assert kraft_answers["api_versions"] == kafka1["api_versions"]
    before = kraft_info(kraft3)
    assert before is not None and before.high_watermark is not None
    wait_for(
        "the Kafka quorum's high watermark to move with the kraft voter",
        lambda: (
            (i := kraft_info(kraft3)) is not None
            and (i.high_watermark or 0) > (before.high_watermark or 0)
        ),
        60.0,
    )
    removed3 = kraft_cli(
        "quorum",
        "remove-controller",
        "--bootstrap-controller",
        bootstrap,
        "-i",
        "3",
        "-d",
        uuid_to_base64(kraft_dir),
        timeout_s=90.0,
    )
    assert removed3.returncode == 0, removed3.stderr
    wait_for(
        "the kraft node to observe again",
        lambda: (i := kraft_info(kraft3)) is not None and sorted(i.voters) == [1],
        60.0,
    )

    # Both tools' tables: the same rows in the same order, cells padded alike, equal but
    # what moves between the two runs.
    repl = _same_describe(procs, bootstrap, "--replication")
    statuses = {
        int(row[0]): row[-1]
        for row in (line.split() for line in repl.splitlines()[1:] if line.strip())
    }
    assert statuses[1] == "Leader"
    assert statuses[3] == "Observer"
    assert statuses.get(2, "Observer") == "Observer"
    assert "Follower" not in statuses.values()
    # The Kafka leader lists its observers by the buckets of its HashMap of ReplicaKey, the
    # order a kraft leader answers in (kraft.protocol.rpc.in_kafka_order).
    observer_rows = [
        ReplicaKey(NodeId(int(row[0])), DirectoryId(uuid_from_base64(row[1])))
        for row in (line.split() for line in repl.splitlines()[1:] if line.strip())
        if row[-1] == "Observer"
    ]
    assert hash_order(observer_rows, replica_key_hash) == observer_rows
    for k in nodes.values():
        assert k.fatal_lines() == [], k.name
    assert observer.stop(3) == 0


def _wire_answers(address: Address) -> dict[str, object]:
    """What a node answers to DescribeCluster (v2, the controllers) and which versions of the
    KRaft APIs its ApiVersions answer lists (Fetch: at most Kafka's newest)."""
    from kraft.client import Connection, describe_cluster_request
    from kraft.protocol import SUPPORTED_APIS, ApiKey
    from kraft.protocol.values import get_int, get_structs

    async def ask() -> dict[str, object]:
        async with await Connection.open(address) as conn:
            cluster = dict(
                await conn.request(ApiKey.DESCRIBE_CLUSTER, 2, describe_cluster_request())
            )
            versions = await conn.request(
                ApiKey.API_VERSIONS,
                4,
                {"client_software_name": "t", "client_software_version": "1"},
            )
        cluster.pop("throttle_time_ms", None)
        table = {
            get_int(a, "api_key"): (get_int(a, "min_version"), get_int(a, "max_version"))
            for a in get_structs(versions, "api_keys")
        }
        return {
            "describe_cluster": cluster,
            "api_versions": {k: table.get(k) for k in SUPPORTED_APIS if k != ApiKey.FETCH},
        }

    return asyncio.run(ask())


def _kraft_observer(procs: Procs, cluster_id: str, bootstrap: str) -> LocalCluster:
    """Node 3, formatted by `kraft format` (no voter set), configured with only
    controller.quorum.bootstrap.servers."""
    port = ports_for([3])[3]
    c = LocalCluster(
        procs.root / "kraft",
        [port],
        cluster_id=cluster_id,
        dynamic=True,
        overrides={**KRAFT_QUORUM, "controller.quorum.bootstrap.servers": bootstrap},
        trace=True,
    )
    c.node_ids = (3,)
    c.addresses = {3: Address("127.0.0.1", port)}
    c.directory_ids = {3: generate_directory_id(random.Random())}
    c.observer_ids = (3,)
    c.format()
    procs.track(c)
    return c
