"""The quorum's timing: one configuration shared by the core, the simulator and the node.

Milliseconds (virtual in the simulator). The node reads these from its Kafka-named
properties (kraft.server.config); the simulator and the tests build one directly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QuorumTiming:
    # quorum.election.timeout.ms: a voter that hears of no leader stands after this (jittered).
    election_timeout_ms: int = 1000
    # quorum.fetch.timeout.ms: a follower whose leader stays silent this long stands.
    fetch_timeout_ms: int = 2000
    # quorum.election.backoff.max.ms: the most a preferred successor waits before standing.
    election_backoff_max_ms: int = 1000
    # quorum.retry.backoff.ms: the wait before resending a request that failed.
    retry_backoff_ms: int = 20
    # quorum.request.timeout.ms: an unanswered request is resent after this.
    request_timeout_ms: int = 2000
    # controller.quorum.fetch.max.bytes: the most bytes a Fetch asks for and a leader returns.
    fetch_max_bytes: int = 1 << 20
    # quorum.append.linger.ms: how long a leader gathers client appends into one batch.
    append_linger_ms: int = 0
    # quorum.fetch.max.wait.ms: how long a leader may hold a Fetch with nothing new.
    fetch_max_wait_ms: int = 500
    # metadata.start.offset.lag.time.max.ms (KIP-630): a leader moves its log start to its
    # latest snapshot once the log start is this old, even if a live replica still needs it.
    start_offset_lag_time_max_ms: int = 7 * 24 * 3600 * 1000
