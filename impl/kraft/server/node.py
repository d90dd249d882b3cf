"""A KRaft node: one asyncio process that drives one replica over TCP and files.

Startup reads meta.properties (the node id must match the configuration), opens and recovers
the log, loads the latest valid snapshot into the state machine (kraft.server.snapshots: the
applier replays the log from its end offset; a snapshot past the log end makes the log start
there), takes the voter set from the storage when it states one (a dynamic quorum, KIP-853:
kraft.server.voters), reads the quorum-state file, builds the replica with the partition directory's
checkpoint files as its snapshots (kraft.server.snapshot_store: KIP-630, the core decides
when to snapshot, advance the log start as far as Kafka's retention asks (kraft.server.retention)
and fetch a snapshot; the driver performs it), a randomness source seeded from the OS and a
millisecond clock, then serves. A log that starts
after offset 0 with no valid snapshot at or after its start cannot rebuild the state: the node
refuses to start.
While it runs, its peers follow the log's voter set (KIP-853: links at the endpoints of the
latest Voters record, appended or installed from a snapshot; kraft.server.peers), and a node
configured with `controller.quorum.bootstrap.servers` that observes without a leader finds one
through them (a Fetch; the answer names the leader and its endpoint), as Kafka's observers do.
SIGTERM/SIGINT shut down gracefully: the replica resigns if it leads (EndQuorumEpoch),
bounded by `shutdown_timeout_ms`, then the log is flushed and closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import itertools
import logging
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import replace

from kraft.app.machines import new_state_machine
from kraft.app.port import LeaderAndEpoch, ReadableStateMachine
from kraft.core.effects import Send
from kraft.core.events import Event, Receive, SendFailed
from kraft.core.messages import FetchRequest, Request
from kraft.core.replica import Replica, ReplicaConfig
from kraft.core.snapshots import LogStartPolicy
from kraft.core.voter_records import voters_record_at
from kraft.errors import KraftError
from kraft.ids import NodeId, Offset, ReplicaKey
from kraft.protocol.rpc import Listener, is_request
from kraft.server.applier import Applier
from kraft.server.config import DEFAULT_LISTENER_NAME, NodeConfig, VoterAddress
from kraft.server.driver import Clock, Driver, Release
from kraft.server.inbound import RequestServer
from kraft.server.peers import PeerLink, Peers
from kraft.server.retention import Retention, RetentionLimits
from kraft.server.snapshot_store import FileSnapshots
from kraft.server.snapshots import SnapshotPolicy, Snapshotter, recover_state
from kraft.server.voters import voter_addresses, voters_at_start
from kraft.storage.log_adapter import BatchReader, log_state_of
from kraft.storage.meta_properties import MetaProperties, read_meta_properties
from kraft.storage.quorum_state import FILE_NAME as QUORUM_STATE_FILE
from kraft.storage.quorum_state import read_quorum_state
from kraft.storage.segmented_log import LOG_DIR_NAME, SegmentedLog
from kraft.tracing import TraceFile

__all__ = ["Node", "StartupError", "run_node", "wall_anchored_clock"]

log = logging.getLogger("kraft.node")


class StartupError(KraftError):
    """The node cannot start with this configuration and data directory."""


def wall_anchored_clock() -> Clock:
    """Milliseconds that never go backwards (monotonic) yet read as wall-clock time, so the
    timestamps DescribeQuorum reports are comparable with Kafka's."""
    wall0 = time.time_ns() // 1_000_000
    mono0 = time.monotonic_ns()
    return lambda: wall0 + (time.monotonic_ns() - mono0) // 1_000_000


class _Transport:
    """Routes the core's Sends: a request to the peer link of its destination (kraft.server.peers:
    made on first use, at the address the latest voter set of the log gives, else one a
    response named); an answer to the listener, which finds the request's connection by the
    answer's reply token alone. Before routing it follows the replica's voter set: when a
    Voters record appended, truncated away or installed from a snapshot changed it, the
    links and the endpoints the listener reports follow (KIP-853)."""

    def __init__(self) -> None:
        self.peers: Peers = Peers(_no_link, ())
        self.server: RequestServer | None = None
        self.driver: Driver | None = None
        self.listener_name = DEFAULT_LISTENER_NAME
        self.static_voters: tuple[VoterAddress, ...] = ()
        self._voter_ids: tuple[NodeId, ...] | None = None
        self._unknown: set[NodeId] = set()

    def follow_voters(self) -> None:
        """Take the links and the listener's endpoints from the replica's latest voter set
        (a VoterSet's ids are one tuple for its life: an identity check per send)."""
        assert self.driver is not None
        replica = self.driver.replica
        view = replica.view()
        if view.voters is self._voter_ids:
            return
        self._voter_ids = view.voters
        record = voters_record_at(replica, Offset(view.end_offset + 1))
        voters = (
            self.static_voters if record is None else voter_addresses(record, self.listener_name)
        )
        keep = () if view.leader_id is None else (view.leader_id,)
        self.peers.set_voters([(v.node_id, v.host, v.port) for v in voters], keep)
        server = self.server
        if server is not None and server.set_voters(tuple(voters)):
            log.info("voters: %s", ",".join(str(v) for v in voters) or "none known")

    def prepare(self, send: Send) -> Release:
        self.follow_voters()
        if is_request(send.message):
            peer = self.peers.link_for(send.dst)
            if peer is None:
                return functools.partial(self._unreachable, send.dst, send.message)
            self._unknown.discard(send.dst)
            return peer.prepare(send.message)
        assert self.server is not None
        return self.server.prepare_response(send)

    def _unreachable(self, dst: NodeId, request: Request) -> None:
        """No address for `dst`: the core hears at once and retries by its rules."""
        if dst not in self._unknown:
            self._unknown.add(dst)
            log.warning("no address for node %d", dst)
        assert self.driver is not None
        self.driver.submit(SendFailed(self.driver.clock(), dst, request))


def _no_link(node: NodeId, host: str, port: int) -> PeerLink:
    raise RuntimeError(f"no peers yet: node {node} at {host}:{port}")


LOCK_FILE = ".lock"


def _lock_data_dir(config: NodeConfig) -> int:
    """Hold an exclusive lock on `<data-dir>/.lock` for the life of the process, as Kafka does,
    so that a second node on the same directory fails instead of recovering a live log."""
    fd = os.open(config.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StartupError(
            f"{config.data_dir} is in use by another process (locked {LOCK_FILE})"
        ) from None
    return fd


class Node:
    def __init__(
        self,
        config: NodeConfig,
        driver: Driver,
        server: RequestServer,
        transport: _Transport,
        trace: TraceFile | None,
        *,
        lock: int,
        snapshotter: Snapshotter[ReadableStateMachine],
    ) -> None:
        self.config = config
        self.snapshotter = snapshotter
        self._lock = lock
        self.driver = driver
        self.server = server
        self._transport = transport
        self._trace = trace
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._finder: asyncio.Task[None] | None = None
        self._bootstrap_links: list[PeerLink] = []
        self.address: tuple[str, int] = (config.listener_host, config.listener_port)

    @classmethod
    async def open(cls, config: NodeConfig) -> Node:
        meta = read_meta_properties(config.data_dir)
        if meta.node_id != config.node_id:
            raise StartupError(
                f"{config.data_dir} was formatted for node {meta.node_id}, "
                f"but this is node {config.node_id} (node.id)"
            )
        lock = _lock_data_dir(config)
        try:
            return await cls._open(config, meta, lock)
        except BaseException:
            os.close(lock)
            raise

    @classmethod
    async def _open(cls, config: NodeConfig, meta: MetaProperties, lock: int) -> Node:
        log_ = SegmentedLog.open(config.data_dir, segment_bytes=config.segment_bytes)
        r = log_.recovery_report
        log.info(
            "log recovered: %d segment(s), %d batch(es), offsets %d..%d%s",
            r.segments,
            r.batches,
            log_.start_offset,
            log_.end_offset,
            f", dropped {r.bytes_dropped} bytes from offset {r.offset_dropped_from}: {r.reason}"
            if r.bytes_dropped
            else "",
        )
        store = new_state_machine(config.state_machine, log_.start_offset)
        try:
            loaded = recover_state(log_.dir, store, log_)
        except BaseException:
            log_.close()  # SnapshotRefusedError: the snapshot at the log start is unusable
            raise
        if log_.start_offset > 0 and (
            loaded is None or loaded.snapshot_id.offset < log_.start_offset
        ):
            start = log_.start_offset
            log_.close()
            raise StartupError(
                f"the log starts at offset {start} but no valid snapshot ends at or after it: "
                "the state below it is lost here; wipe and re-format the data directory so "
                "that the node fetches a snapshot from the leader"
            )
        static_voters = tuple(ReplicaKey(v.node_id) for v in config.voters)
        try:
            config, voter_history = voters_at_start(config, loaded, log_)
        except KraftError:
            log_.close()
            raise
        files = FileSnapshots(log_.dir)
        qs_path = config.data_dir / LOG_DIR_NAME / QUORUM_STATE_FILE
        election = read_quorum_state(qs_path)
        clock = wall_anchored_clock()
        now = clock()
        replica = Replica(
            ReplicaConfig(
                node=ReplicaKey(config.node_id, meta.directory_id),
                cluster_id=meta.cluster_id,
                voters=static_voters,
                timing=config.timing,
                log_start_policy=LogStartPolicy.RETENTION,
                listener_name=config.listener_name,
            ),
            election_state=election,
            log_state=replace(log_state_of(log_, files.ids()), voter_history=voter_history),
            reader=BatchReader(log_, verify=True),
            rng=random.Random(os.urandom(16)),
            now_ms=now,
            snapshots=files,
        )
        trace = None if config.trace_path is None else TraceFile(config.trace_path, config.node_id)
        me = config.voter(config.node_id)
        # Our endpoint, sent to the voters while we lead (KIP-853), also once we are a voter
        # added at runtime.
        listeners = (
            Listener(config.listener_name, config.listener_host, config.listener_port)
            if me is None
            else Listener(config.listener_name, me.host, me.port),
        )
        transport = _Transport()
        transport.listener_name = config.listener_name
        transport.static_voters = config.voters
        driver = Driver(
            replica,
            log_,
            qs_path,
            transport,
            clock,
            voter_ids=tuple(v.node_id for v in config.voters),
            trace=trace,
            snapshot_files=files,
            # kraft.version 1 (KIP-853) for a dynamic quorum, also one found through
            # controller.quorum.bootstrap.servers.
            quorum_state_version=1 if voter_history or not config.voters else 0,
        )
        transport.driver = driver
        transport.peers = Peers(
            functools.partial(_link, config=config, driver=driver, listeners=listeners),
            [(v.node_id, v.host, v.port) for v in config.voters if v.node_id != config.node_id],
        )
        server = RequestServer(config, meta.cluster_id, meta.directory_id, driver)
        transport.server = server
        applier = driver_state_machine(driver, log_, store)
        server.applier = applier
        retention = Retention(
            log_,
            log_.dir,
            RetentionLimits(config.retention_max_bytes, config.retention_ms),
            clock,
            submit=driver.submit,
        )
        snapshotter = Snapshotter(
            applier,
            log_,
            log_.dir,
            SnapshotPolicy(config.snapshot_max_new_record_bytes, config.snapshot_max_interval_ms),
            clock,
            submit=driver.submit,
            loaded=None if loaded is None else loaded.snapshot_id,
            retention=retention,
        )
        snapshotter.voters_at = functools.partial(voters_record_at, replica)
        driver.on_high_watermark = snapshotter.on_high_watermark
        driver.listener_name = config.listener_name
        driver.snapshot_hooks = snapshotter
        node = cls(config, driver, server, transport, trace, lock=lock, snapshotter=snapshotter)
        try:
            node.address = await server.start()
        except OSError as e:
            log_.close()
            if trace is not None:
                trace.close()
            raise StartupError(
                f"cannot listen on {config.listener_host}:{config.listener_port}: {e.strerror}"
            ) from None
        log.info(
            "node %d (cluster %s) listening on %s:%d (%s loop); stored election state: %s",
            config.node_id,
            meta.cluster_id,
            *node.address,
            type(asyncio.get_running_loop()).__module__.partition(".")[0],
            "none" if election is None else election,
        )
        driver.on_fatal = node.request_stop
        driver.start()
        node._task = asyncio.create_task(driver.run())
        if config.bootstrap_servers:
            node._finder = asyncio.create_task(node._find_quorum(meta))
        retention.start()
        return node

    async def _find_quorum(self, meta: MetaProperties) -> None:
        """KIP-853's observer discovery through `controller.quorum.bootstrap.servers`, while
        the replica is an observer that knows no leader (a node whose storage states no voter
        set; or whose voters are all gone): a Fetch to each bootstrap server in turn, as
        Kafka's observers do; the answer names the leader and its endpoint (Fetch v17+), the
        endpoint goes to the peers and the answer to the core, which then follows that leader
        and learns the voter set from the log it fetches (and asks the voters itself too, by
        its own discovery rule). Answers come from node ids -2, -3, ... (Kafka's ids for
        bootstrap servers); a failed attempt is not the core's business (it sent nothing), so
        only answers reach it."""
        config, drv = self.config, self.driver

        def answer(event: Event) -> None:
            if isinstance(event, Receive):
                drv.submit(event)

        me = ReplicaKey(config.node_id, meta.directory_id)
        self._bootstrap_links = [
            _link(
                NodeId(-2 - i), host, port, config=config, driver=drv, listeners=(), submit=answer
            )
            for i, (host, port) in enumerate(config.bootstrap_servers)
        ]
        for link in self._bootstrap_links:
            link.on_endpoints = self._transport.peers.learn
        timing = config.timing
        for attempt in itertools.count():
            view = drv.replica.view()
            if view.leader_id is None and not view.is_voter:
                link = self._bootstrap_links[attempt % len(self._bootstrap_links)]
                request = FetchRequest(
                    cluster_id=meta.cluster_id,
                    replica=me,
                    replica_epoch=view.epoch,
                    fetch_offset=view.end_offset,
                    last_fetched_epoch=view.last_epoch,
                    log_start_offset=view.log_start_offset,
                    max_bytes=timing.fetch_max_bytes,
                    max_wait_ms=0,
                )
                link.prepare(request)()
            await asyncio.sleep(max(timing.retry_backoff_ms, 50) / 1000)

    def request_stop(self) -> None:
        self._stop.set()

    async def run_until_stopped(self) -> None:
        """Serve until request_stop() or a fatal driver error (re-raised)."""
        assert self._task is not None
        stop = asyncio.create_task(self._stop.wait())
        done, _ = await asyncio.wait({self._task, stop}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            stop.cancel()
            await self.close(graceful=False)
            self._task.result()  # a driver that ended on its own failed: raise its error
            return
        await self.close(graceful=True)

    async def close(self, *, graceful: bool) -> None:
        drv = self.driver
        if graceful and self._task is not None and not self._task.done():
            done = await drv.shutdown(self.config.shutdown_timeout_ms)
            log.info("shutdown %s", "complete" if done else "timed out")
        drv.stop()
        if self._task is not None and not self._task.done():
            with contextlib.suppress(Exception):
                await self._task
        drv.fail_all_appends("the node is shutting down; the records may or may not commit")
        await asyncio.sleep(0)  # let append answers be written
        await self.server.close()
        if self._finder is not None:
            self._finder.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._finder
        for link in self._bootstrap_links:
            await link.close()
        await self._transport.peers.close()
        await self.snapshotter.close()
        if self.snapshotter.retention is not None:
            await self.snapshotter.retention.close()
        drv.log.close()
        log.info("%d batches stepped, %d fsyncs", drv.batches, drv.fsyncs)
        if self._trace is not None:
            self._trace.close()
        os.close(self._lock)


def _link(
    node: NodeId,
    host: str,
    port: int,
    *,
    config: NodeConfig,
    driver: Driver,
    listeners: tuple[Listener, ...],
    submit: Callable[[Event], None] | None = None,
) -> PeerLink:
    """A link to `node` at host:port; its answers and failures go to the driver (or to
    `submit`)."""
    return PeerLink(
        node,
        host,
        port,
        driver.submit if submit is None else submit,
        driver.clock,
        client_id=f"kraft-node-{config.node_id}",
        request_timeout_ms=config.timing.request_timeout_ms,
        max_frame_bytes=max(config.max_frame_bytes, 16 << 20),
        listeners=listeners,
    )


def driver_state_machine(
    driver: Driver, log_: SegmentedLog, store: ReadableStateMachine
) -> Applier[ReadableStateMachine]:
    """The node's state machine (kraft.app.machines), caught up to the high watermark the driver has
    released (kraft.server.applier); from where `store` is (the log start, or the end offset
    of the snapshot loaded into it) it replays the log up to the HWM the node learns."""

    def leader() -> LeaderAndEpoch:
        view = driver.replica.view()
        return LeaderAndEpoch(view.leader_id, view.epoch)

    reader = BatchReader(log_, verify=True)
    return Applier(reader, store, lambda: driver.high_watermark, leader)


PROFILE_ENV = "KRAFT_PROFILE_DIR"
PROFILE_CPU_ENV = "KRAFT_PROFILE_CPU"


async def run_node(config: NodeConfig) -> int:
    """Run a node until SIGTERM/SIGINT; 0 after a clean shutdown.

    With KRAFT_PROFILE_DIR set, the whole run is profiled with cProfile and the stats are
    written to `<dir>/node-<id>.prof` at shutdown (for benchmarks; off by default). Times are
    wall-clock, or with KRAFT_PROFILE_CPU=1 the CPU time of the event loop's thread (on a
    shared machine, wall-clock times include the waits for a core)."""
    where = os.environ.get(PROFILE_ENV)
    if not where:
        return await _run_node(config)
    import cProfile

    cpu = os.environ.get(PROFILE_CPU_ENV, "") not in ("", "0")
    profiler = cProfile.Profile(time.thread_time) if cpu else cProfile.Profile()
    profiler.enable()
    try:
        return await _run_node(config)
    finally:
        profiler.disable()
        os.makedirs(where, exist_ok=True)
        profiler.dump_stats(os.path.join(where, f"node-{config.node_id}.prof"))


async def _run_node(config: NodeConfig) -> int:
    node = await Node.open(config)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, node.request_stop)
    await node.run_until_stopped()
    if node.driver.fatal is not None:
        log.error(
            "node %d stopped: its log cannot be served: %s", config.node_id, node.driver.fatal
        )
        return 1
    log.info("node %d stopped", config.node_id)
    return 0
