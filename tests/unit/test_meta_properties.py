"""kraft.storage.meta_properties: Kafka's meta.properties file and `format`.

Kafka's format: Java properties text, `version=1`, `cluster.id`, `node.id` and `directory.id`
(a UUID in Kafka's text form: URL-safe base64 of its 16 bytes, no padding).
"""

from __future__ import annotations

import random
import re
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.errors import KraftError
from kraft.ids import ClusterId, DirectoryId, NodeId
from kraft.storage.meta_properties import (
    META_PROPERTIES,
    MetaProperties,
    MetaPropertiesError,
    format_storage,
    generate_cluster_id,
    parse_meta_properties,
    read_meta_properties,
    render_meta_properties,
    validate_cluster_id,
    write_meta_properties,
)

DIR_ID = DirectoryId(uuid.UUID("00112233-4455-6677-8899-aabbccddeeff"))
# base64url of bytes 00 11 22 ... ff, written out by hand: "ABEiM0RVZneImaq7zN3u_w".
DIR_TEXT = "ABEiM0RVZneImaq7zN3u_w"
CLUSTER = ClusterId("MkU3OEVBNTcwNTJENDM2Qk")  # the cluster id in Kafka's quickstart

GOLDEN = (
    "#Written by kraft\n"
    "cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
    "directory.id=ABEiM0RVZneImaq7zN3u_w\n"
    "node.id=3\n"
    "version=1\n"
)


def test_golden_text() -> None:
    props = MetaProperties(CLUSTER, NodeId(3), DIR_ID)
    assert render_meta_properties(props) == GOLDEN
    assert parse_meta_properties(GOLDEN) == props


def test_reads_a_file_as_java_writes_it() -> None:
    """Java's Properties.store writes a comment, a date comment, then keys in hash order."""
    text = (
        "#\n#Tue Jan 02 10:00:00 UTC 2024\n"
        "node.id=3\ndirectory.id=ABEiM0RVZneImaq7zN3u_w\n"
        "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
    )
    assert parse_meta_properties(text) == MetaProperties(CLUSTER, NodeId(3), DIR_ID)


@settings(max_examples=50)
@given(seed=st.integers(0, 2**32), node_id=st.integers(0, 2**31 - 1))
def test_write_read_round_trip(
    tmp_path_factory: pytest.TempPathFactory, seed: int, node_id: int
) -> None:
    d = tmp_path_factory.mktemp("data")
    rng = random.Random(seed)
    props = format_storage(d, generate_cluster_id(rng), node_id, rng=rng)
    assert read_meta_properties(d) == props
    assert props.version == 1
    assert sorted(p.name for p in d.iterdir()) == [META_PROPERTIES]  # no temporary left


def test_write_replaces_atomically(tmp_path: Path) -> None:
    write_meta_properties(tmp_path, MetaProperties(CLUSTER, NodeId(1), DIR_ID))
    write_meta_properties(tmp_path, MetaProperties(CLUSTER, NodeId(2), DIR_ID))
    assert read_meta_properties(tmp_path).node_id == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [META_PROPERTIES]


def test_missing_file_says_not_formatted(tmp_path: Path) -> None:
    with pytest.raises(MetaPropertiesError, match="not formatted"):
        read_meta_properties(tmp_path)


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        (GOLDEN.replace("version=1", "version=0"), "version '0' is not supported"),
        (GOLDEN.replace("version=1", "version=2"), "version '2' is not supported"),
        (GOLDEN.replace("version=1\n", ""), "no version"),
        (GOLDEN.replace("node.id=3\n", ""), "missing node.id"),
        (GOLDEN.replace("cluster.id=MkU3OEVBNTcwNTJENDM2Qk", "cluster.id="), "missing cluster.id"),
        (GOLDEN.replace("directory.id=ABEiM0RVZneImaq7zN3u_w\n", ""), "missing directory.id"),
        (GOLDEN.replace("node.id=3", "node.id=three"), "not an integer"),
        (GOLDEN.replace("node.id=3", "node.id=-1"), "negative"),
        (GOLDEN.replace(DIR_TEXT, "not-a-uuid"), "directory.id 'not-a-uuid' is not a UUID"),
        (GOLDEN.replace(DIR_TEXT, "AAAAAAAAAAAAAAAAAAAAAA"), "reserved zero"),
        (GOLDEN + "node.id=4\n", "node.id appears twice"),
        (GOLDEN + "garbage\n", "not a key=value line"),
        (GOLDEN + "x=a\\\n", "escapes"),
    ],
)
def test_corrupt_contents_are_refused(tmp_path: Path, text: str, complaint: str) -> None:
    (tmp_path / META_PROPERTIES).write_text(text)
    with pytest.raises(MetaPropertiesError, match=re.escape(complaint)):
        read_meta_properties(tmp_path)


def test_binary_garbage_is_refused(tmp_path: Path) -> None:
    (tmp_path / META_PROPERTIES).write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(MetaPropertiesError, match="corrupt"):
        read_meta_properties(tmp_path)


def test_format_refuses_a_formatted_directory(tmp_path: Path) -> None:
    """kafka-storage format without --ignore-formatted refuses to overwrite."""
    first = format_storage(tmp_path, CLUSTER, 1, rng=random.Random(1))
    with pytest.raises(MetaPropertiesError, match="already formatted"):
        format_storage(tmp_path, CLUSTER, 2, rng=random.Random(2))
    assert read_meta_properties(tmp_path) == first


def test_format_creates_the_directory_and_keeps_a_given_directory_id(tmp_path: Path) -> None:
    d = tmp_path / "a" / "b"
    props = format_storage(d, CLUSTER, 7, directory_id=DIR_ID)
    assert props == MetaProperties(CLUSTER, NodeId(7), DIR_ID)
    assert (d / META_PROPERTIES).read_text().splitlines()[1:] == [
        f"cluster.id={CLUSTER}",
        f"directory.id={DIR_TEXT}",
        "node.id=7",
        "version=1",
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "industrial-streaming-cluster-001",
        "",
        "MkU3OEVBNTcwNTJENDM2Q",
        "MkU3OEVBNTcwNTJENDM2Qk+",
        "MkU3OEVBNTcw+TJENDM2Qk",
    ],
)
def test_format_refuses_a_cluster_id_that_is_not_a_base64_uuid(tmp_path: Path, bad: str) -> None:
    """Kafka: the cluster id must parse as a UUID (URL-safe base64 of 16 bytes)."""
    with pytest.raises(MetaPropertiesError, match="not a valid UUID"):
        format_storage(tmp_path, bad, 1)
    assert not (tmp_path / META_PROPERTIES).exists()


def test_padded_cluster_id_is_accepted_as_kafka_does() -> None:
    assert validate_cluster_id(CLUSTER + "==") == CLUSTER + "=="


def test_format_refuses_negative_node_id(tmp_path: Path) -> None:
    with pytest.raises(MetaPropertiesError, match="negative"):
        format_storage(tmp_path, CLUSTER, -1)


@settings(max_examples=200)
@given(st.integers(0, 2**64))
def test_generated_cluster_ids_are_22_char_base64_uuids(seed: int) -> None:
    cid = generate_cluster_id(random.Random(seed))
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", cid)
    assert not cid.startswith("-")
    assert validate_cluster_id(cid) == cid


def test_generation_is_deterministic_under_a_seed() -> None:
    assert generate_cluster_id(random.Random(5)) == generate_cluster_id(random.Random(5))
    assert generate_cluster_id(random.Random(5)) != generate_cluster_id(random.Random(6))


def test_error_is_a_kraft_error() -> None:
    assert issubclass(MetaPropertiesError, KraftError)
