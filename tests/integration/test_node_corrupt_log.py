"""A node whose older segment rots while it leads: it reports the file and position, refuses
to serve the damaged batch, resigns and stops (issue: the follower stalled, no log line)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cluster_harness import FAST
from polling import kraft_info, wait_for

from kraft.client import ClientError, append
from kraft.client_read import read
from kraft.cluster import LocalCluster, free_ports
from kraft.errors import ErrorCode
from kraft.records import LOG_OVERHEAD, iter_batches
from kraft.storage.segmented_log import LOG_DIR_NAME


def test_a_reader_never_gets_a_rotten_batch_and_the_node_stops_saying_where(
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(
        tmp_path, free_ports(1), overrides={**FAST, "metadata.log.segment.bytes": "2048"}
    )
    cluster.format()
    address = cluster.addresses[1]
    try:
        cluster.start()
        wait_for("a leader", lambda: (i := kraft_info(address)) is not None and i.state == "Leader")
        for n in range(60):
            asyncio.run(append([address], [f"value-{n:03d}".encode() * 4]))
        assert cluster.stop(1) == 0

        segments = sorted((cluster.data_dir(1) / LOG_DIR_NAME).glob("*.log"))
        assert len(segments) >= 3
        first = segments[0]
        data = bytearray(first.read_bytes())
        pos, header = list(iter_batches(data))[2]
        data[pos + LOG_OVERHEAD + header.length - 1] ^= 0x01
        first.write_bytes(bytes(data))

        cluster.start()
        # Readers are served below the high watermark, which a restarted leader knows only
        # once it committed in its epoch: wait for it, or the read has nothing to read.
        wait_for(
            "a leader again, with a high watermark",
            lambda: (
                (i := kraft_info(address)) is not None
                and i.state == "Leader"
                and i.high_watermark is not None
            ),
        )
        with pytest.raises(ClientError) as caught:
            asyncio.run(read(address, 0))
        assert caught.value.error is ErrorCode.KAFKA_STORAGE_ERROR
        wait_for("the node to stop", lambda: not cluster.is_running(1), timeout_s=30.0)
        assert cluster.stop(1) == 1
        output = cluster.log_path(1).read_text()
        assert f"{first} at byte {pos}" in output
        assert "cannot serve the log" in output
    finally:
        cluster.stop_all()
