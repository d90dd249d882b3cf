"""crash-unflushed: the fsync journal says what a node made durable, and the cut after a
kill drops only bytes beyond it; kraft's log recovers from every such cut with every fsynced
record intact."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kraft.ids import Epoch, Offset
from kraft.records import decode_records, iter_batches
from kraft.storage.replicated_log import CorruptLogError
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog
from refinement.chaos.probe import durable_sizes
from refinement.chaos.procs import Journal, drop_unflushed_tail, segments

FLUSHED = 12  # batches appended and fsynced
UNFLUSHED = 7  # batches appended after the last fsync

# Appends under the probe, fsyncs FLUSHED batches, appends UNFLUSHED more, then dies without
# closing the log (os._exit: what was written is in the page cache, as after a SIGKILL).
_WRITER = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from refinement.chaos.probe import install
    install(Path(sys.argv[1]))
    from kraft.ids import Epoch
    from kraft.storage.segmented_log import SegmentedLog
    log = SegmentedLog.open(sys.argv[2], segment_bytes=int(sys.argv[3]))
    for i in range({flushed}):
        log.append_as_leader([b"durable-%d" % i], Epoch(1), timestamp_ms=0)
    log.flush()
    for i in range({unflushed}):
        log.append_as_leader([b"volatile-%d" % i], Epoch(1), timestamp_ms=0)
    os._exit(0)
    """
).format(flushed=FLUSHED, unflushed=UNFLUSHED)


def _values(data_dir: Path) -> list[bytes | None]:
    out: list[bytes | None] = []
    with SegmentedLog.open(data_dir) as log:
        offset = log.start_offset
        while offset < log.end_offset:
            chunk = log.read(offset, 1 << 20)
            data = bytes(chunk.data)
            for pos, header in iter_batches(data):
                out += [r.value for r in decode_records(data, pos, header)]
            offset = Offset(chunk.next_offset)
    return out


@pytest.fixture(scope="module", params=[1 << 20, 400], ids=["one-segment", "many-segments"])
def crashed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crashed")
    subprocess.run(
        [
            sys.executable,
            "-c",
            _WRITER,
            str(root / "journal"),
            str(root / "data"),
            str(request.param),
        ],
        check=True,
        env={**os.environ},
    )
    return root


def test_the_journal_records_what_was_fsynced(crashed: Path) -> None:
    sizes = durable_sizes(crashed / "journal")
    log_dir = crashed / "data" / LOG_DIR_NAME
    segs = segments(log_dir)
    durable_total = sum(sizes.get(os.path.realpath(s), 0) for s in segs)
    on_disk = sum(s.stat().st_size for s in segs)
    assert 0 < durable_total < on_disk
    assert Journal(crashed / "journal").refresh() == sizes


@pytest.mark.parametrize("cut", [0.0, 0.3, 0.7, 1.0])
@pytest.mark.parametrize("torn", [False, True])
def test_a_cut_keeps_every_fsynced_record(
    crashed: Path, tmp_path: Path, cut: float, torn: bool
) -> None:
    data = tmp_path / "data"
    shutil.copytree(crashed / "data", data)
    log_dir = data / LOG_DIR_NAME
    # The journal names the original files; map them onto the copy.
    durable = {
        os.path.realpath(log_dir / Path(p).name): n
        for p, n in durable_sizes(crashed / "journal").items()
        if Path(p).parent == (crashed / "data" / LOG_DIR_NAME).resolve()
    }
    before = {s.name: s.stat().st_size for s in segments(log_dir)}
    dropped, files = drop_unflushed_tail(log_dir, durable, cut, torn)
    for name, keep, size, new in files:
        assert keep <= new < size == before[name]
        assert new >= durable.get(os.path.realpath(log_dir / name), 0)
    if cut == 0.0:
        kept = sum(durable.get(os.path.realpath(log_dir / name), 0) for name in before)
        assert dropped == sum(before.values()) - kept
    if cut == 1.0:
        assert dropped == 0
    values = _values(data)
    assert values[:FLUSHED] == [b"durable-%d" % i for i in range(FLUSHED)]
    assert values[FLUSHED:] == [b"volatile-%d" % i for i in range(len(values) - FLUSHED)]
    if cut == 0.0:
        assert len(values) == FLUSHED


def test_a_cut_below_the_journal_would_be_caught(crashed: Path, tmp_path: Path) -> None:
    """The check above can fail: with an empty journal the cut drops fsynced records."""
    data = tmp_path / "data"
    shutil.copytree(crashed / "data", data)
    drop_unflushed_tail(data / LOG_DIR_NAME, {}, 0.3, False)
    try:
        survivors = len(_values(data))
    except CorruptLogError:
        survivors = -1  # the log does not even open: fsynced data is gone either way
    assert survivors < FLUSHED


def test_appends_still_work_after_recovery_from_a_torn_cut(crashed: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(crashed / "data", data)
    log_dir = data / LOG_DIR_NAME
    durable = {
        os.path.realpath(log_dir / Path(p).name): n
        for p, n in durable_sizes(crashed / "journal").items()
    }
    drop_unflushed_tail(log_dir, durable, 0.5, True)
    with SegmentedLog.open(data) as log:
        end = log.end_offset
        log.append_as_leader([b"after"], Epoch(2), timestamp_ms=0)
        log.flush()
    assert _values(data)[end] == b"after"
