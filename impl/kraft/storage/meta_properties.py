"""Apache Kafka's `meta.properties`: the identity a formatted data directory carries.

The file is Java properties text: comment lines (`#` or `!`), then `key=value` lines. A KRaft
node writes version=1 with cluster.id, node.id and directory.id (Kafka's text form of a UUID:
URL-safe base64 of its 16 bytes without padding). `format_storage` refuses a directory that is
already formatted, as `kafka-storage format` does without --ignore-formatted.
"""

from __future__ import annotations

import os
import random
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kraft.errors import KraftError
from kraft.ids import NO_DIRECTORY, ClusterId, DirectoryId, NodeId
from kraft.protocol.topic_ids import METADATA_TOPIC_ID, uuid_from_base64, uuid_to_base64
from kraft.storage.durable import atomic_write

__all__ = [
    "META_PROPERTIES",
    "META_PROPERTIES_VERSION",
    "MetaProperties",
    "MetaPropertiesError",
    "format_storage",
    "generate_cluster_id",
    "generate_directory_id",
    "parse_meta_properties",
    "read_meta_properties",
    "render_meta_properties",
    "validate_cluster_id",
    "write_meta_properties",
]

META_PROPERTIES: Final = "meta.properties"
META_PROPERTIES_VERSION: Final = 1  # KRaft's; version 0 is the ZooKeeper-era layout (broker.id)

# Kafka's Uuid.fromString takes URL-safe base64 that decodes to 16 bytes: 22 characters, or 24
# with the "==" padding. Python's decoder skips foreign characters, so the alphabet is checked.
_BASE64_UUID: Final = re.compile(r"[A-Za-z0-9_-]{22}(==)?")


class MetaPropertiesError(KraftError):
    """A meta.properties file that is missing, unreadable, corrupt or of another version, or a
    format request that Kafka would refuse."""


@dataclass(frozen=True, slots=True)
class MetaProperties:
    cluster_id: ClusterId
    node_id: NodeId
    directory_id: DirectoryId
    version: int = META_PROPERTIES_VERSION


def _random_uuid(rng: random.Random) -> uuid.UUID:
    """A version-4 UUID from `rng`, never one Kafka reserves (zero, the metadata topic id) and
    never one whose text starts with '-' (Kafka avoids those: they read as a CLI flag)."""
    while True:
        u = uuid.UUID(int=rng.getrandbits(128), version=4)
        if u not in (NO_DIRECTORY, METADATA_TOPIC_ID) and not uuid_to_base64(u).startswith("-"):
            return u


def generate_cluster_id(rng: random.Random) -> ClusterId:
    """A new cluster id as `kafka-storage random-uuid` prints one: 22 base64url characters."""
    return ClusterId(uuid_to_base64(_random_uuid(rng)))


def generate_directory_id(rng: random.Random) -> DirectoryId:
    return DirectoryId(_random_uuid(rng))


def validate_cluster_id(cluster_id: str) -> ClusterId:
    """Kafka's format check: the id must parse as a base64url UUID (16 bytes)."""
    if not _BASE64_UUID.fullmatch(cluster_id):
        raise MetaPropertiesError(
            f"cluster id {cluster_id!r} is not a valid UUID in Kafka's base64 form "
            "(22 URL-safe base64 characters, e.g. from `kraft random-uuid`)"
        )
    uuid_from_base64(cluster_id.rstrip("="))  # cannot fail after the pattern; kept as a guard
    return ClusterId(cluster_id)


def render_meta_properties(props: MetaProperties) -> str:
    """The file's text: one comment line, then the keys in a fixed (sorted) order."""
    lines = [
        "#Written by kraft",
        f"cluster.id={props.cluster_id}",
        f"directory.id={uuid_to_base64(props.directory_id)}",
        f"node.id={props.node_id}",
        f"version={props.version}",
    ]
    return "\n".join(lines) + "\n"


def _properties(text: str, where: str) -> dict[str, str]:
    """The subset of the Java properties format Kafka's writer produces: comments, blank lines
    and `key=value` (or `key: value`) lines. Continuations and escapes are refused, not guessed."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        if "\\" in line:
            raise MetaPropertiesError(f"{where}:{n}: escapes and continuations are not supported")
        m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if m is None:
            raise MetaPropertiesError(f"{where}:{n}: not a key=value line: {raw!r}")
        key, value = m.group(1), m.group(2)
        if key in out:
            raise MetaPropertiesError(f"{where}:{n}: {key} appears twice")
        out[key] = value
    return out


def parse_meta_properties(text: str, where: str = META_PROPERTIES) -> MetaProperties:
    props = _properties(text, where)
    version_text = props.get("version")
    if version_text is None:
        raise MetaPropertiesError(f"{where}: no version")
    if version_text != str(META_PROPERTIES_VERSION):
        raise MetaPropertiesError(
            f"{where}: version {version_text!r} is not supported; KRaft needs version "
            f"{META_PROPERTIES_VERSION} (version 0 is the ZooKeeper-era layout)"
        )
    missing = [k for k in ("cluster.id", "node.id", "directory.id") if not props.get(k)]
    if missing:
        raise MetaPropertiesError(f"{where}: missing {', '.join(missing)}")
    try:
        node_id = int(props["node.id"])
    except ValueError:
        raise MetaPropertiesError(
            f"{where}: node.id {props['node.id']!r} is not an integer"
        ) from None
    if node_id < 0:
        raise MetaPropertiesError(f"{where}: node.id {node_id} is negative")
    directory_text = props["directory.id"]
    if not _BASE64_UUID.fullmatch(directory_text):
        raise MetaPropertiesError(f"{where}: directory.id {directory_text!r} is not a UUID")
    directory_id = uuid_from_base64(directory_text.rstrip("="))
    if directory_id == NO_DIRECTORY:
        raise MetaPropertiesError(f"{where}: directory.id is the reserved zero UUID")
    return MetaProperties(
        ClusterId(props["cluster.id"]), NodeId(node_id), DirectoryId(directory_id)
    )


def read_meta_properties(data_dir: str | os.PathLike[str]) -> MetaProperties:
    path = Path(data_dir) / META_PROPERTIES
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise MetaPropertiesError(
            f"{path} does not exist: the directory is not formatted (run `kraft format`)"
        ) from None
    except OSError as e:
        raise MetaPropertiesError(f"cannot read {path}: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise MetaPropertiesError(f"{path} is not text: the file is corrupt") from None
    return parse_meta_properties(text, str(path))


def write_meta_properties(data_dir: str | os.PathLike[str], props: MetaProperties) -> None:
    """Write atomically: a temporary file, fsync, rename over the name, fsync the directory;
    a crash leaves the old file or the new one, never a torn one."""
    atomic_write(Path(data_dir) / META_PROPERTIES, render_meta_properties(props).encode("utf-8"))


def format_storage(
    data_dir: str | os.PathLike[str],
    cluster_id: str,
    node_id: int,
    *,
    directory_id: DirectoryId | None = None,
    rng: random.Random | None = None,
) -> MetaProperties:
    """Format `data_dir` for this node: create it if needed and write meta.properties with a
    new directory id (drawn from `rng`) unless one is given. Refuses a directory that already
    holds meta.properties."""
    cid = validate_cluster_id(cluster_id)
    if node_id < 0:
        raise MetaPropertiesError(f"node id {node_id} is negative")
    directory = Path(data_dir)
    if (directory / META_PROPERTIES).exists():
        raise MetaPropertiesError(
            f"{directory} is already formatted ({META_PROPERTIES} exists); refusing to overwrite it"
        )
    if directory_id is None:
        directory_id = generate_directory_id(rng if rng is not None else random.Random())
    elif directory_id == NO_DIRECTORY:
        raise MetaPropertiesError("directory id must not be the reserved zero UUID")
    directory.mkdir(parents=True, exist_ok=True)
    props = MetaProperties(cid, NodeId(node_id), directory_id)
    write_meta_properties(directory, props)
    return props
