"""Mixed quorums: kraft and Kafka controllers as the voters of one quorum (static
controller.quorum.voters, one cluster id). Leaders on both sides are killed, with SIGKILL and
with a clean shutdown, over and over; each side wins elections; records keep committing. At
the end every node's log is byte-identical below the HWM, no Kafka process logged a fatal
fault, and the simulator's invariant checkers accept the kraft traces and the final logs.

The records kraft appends are Kafka metadata records (NoOpRecord, and FeatureLevelRecord for
metadata.version), because a Kafka controller replays every committed record."""

from __future__ import annotations

import random
import signal
from dataclasses import dataclass, field

import pytest
from invariant_checks import check_final, check_traces, leader_changes
from kafka_harness import (
    METADATA_DIR,
    METADATA_VERSION_LEVEL,
    Batch,
    KafkaNode,
    Procs,
    batches_below,
    feature_level_record,
    kafka_nodes,
    kraft_append,
    kraft_cluster,
    noop_record,
    ports_for,
    quorum_timeouts,
    read_batches,
    stop_kafka,
    voters_string,
)
from polling import kraft_info, wait_for

from kraft.cluster import LocalCluster
from kraft.storage.meta_properties import generate_cluster_id

pytestmark = pytest.mark.interop

# Failovers until each side's leaders were killed both ways and each side won an election
# after a failover; the bound only stops a run that cannot get there.
MAX_FAILOVERS = 14
WAIT_S = 60.0


@dataclass
class Mixed:
    kraft: LocalCluster
    kafka: dict[int, KafkaNode]
    acked: list[tuple[int, int, int]] = field(default_factory=list)
    down: set[int] = field(default_factory=set)

    @property
    def voters(self) -> list[int]:
        return sorted([*self.kraft.node_ids, *self.kafka])

    def side(self, n: int) -> str:
        return "kafka" if n in self.kafka else "kraft"

    def check_kafka_alive(self) -> None:
        for n, k in self.kafka.items():
            if n not in self.down and not k.running:
                fatal = "\n".join(k.fatal_lines()[-10:])
                raise AssertionError(f"Kafka node {n} exited unexpectedly:\n{fatal}")

    def view(self, n: int) -> tuple[int, int] | None:
        """(epoch, leader id) as node n sees it now, or None if it knows no leader."""
        if n in self.kafka:
            if not self.kafka[n].started:  # its quorum-state file is from before
                return None
            qs = self.kafka[n].quorum_state()
            if qs is None:
                return None
            leader, epoch = int(qs["leaderId"]), int(qs["leaderEpoch"])  # type: ignore[call-overload]
            return None if leader < 0 else (epoch, leader)
        info = kraft_info(self.kraft.addresses[n])
        if info is None or info.leader_id is None:
            return None
        if info.leader_id == n and info.state != "Leader":
            return None
        return (int(info.epoch), int(info.leader_id))

    def agreed_leader(self) -> tuple[int, int] | None:
        """The (epoch, leader) every running voter agrees on, the leader among them."""
        self.check_kafka_alive()
        views = {n: self.view(n) for n in self.voters if n not in self.down}
        distinct = set(views.values())
        if len(distinct) != 1 or None in distinct:
            return None
        (epoch, leader) = next(iter(distinct))  # type: ignore[misc]
        return (epoch, leader) if leader in views else None

    def kraft_hwm(self) -> int:
        """The highest HWM a running kraft node knows (it learns it from any leader)."""
        best = -1
        for n in self.kraft.node_ids:
            if n in self.down:
                continue
            info = kraft_info(self.kraft.addresses[n])
            if info is not None and info.high_watermark is not None:
                best = max(best, int(info.high_watermark))
        return best

    def commit_some(self, leader: int, first: bool) -> None:
        """Records commit under this leader: appended through a kraft leader (acknowledged
        once committed) or, under a Kafka leader, its own NoOpRecords, seen committed as a
        kraft follower's HWM passing them."""
        if self.side(leader) == "kraft":
            values = [noop_record() for _ in range(3)]
            if first:
                values.insert(0, feature_level_record("metadata.version", METADATA_VERSION_LEVEL))
            for _ in range(3):
                ack = kraft_append([self.kraft.addresses[leader]], values, timeout_ms=20_000)
                self.acked.append((int(ack.base_offset), int(ack.last_offset), int(ack.epoch)))
                values = [noop_record()]
        else:
            start = self.kraft_hwm()
            wait_for(
                f"Kafka leader {leader}'s records to commit past {start}",
                lambda: self.kraft_hwm() >= start + 3 or (self.check_kafka_alive() and False),
                WAIT_S,
            )

    def take_down(self, n: int, sig: int) -> None:
        self.down.add(n)
        if n in self.kafka:
            if sig == signal.SIGKILL:
                self.kafka[n].kill()
            else:
                assert self.kafka[n].stop(), f"Kafka node {n} did not shut down cleanly"
        elif sig == signal.SIGKILL:
            self.kraft.kill(n)
        else:
            assert self.kraft.stop(n) == 0, f"kraft node {n} did not shut down cleanly"

    def bring_up(self, n: int) -> None:
        if n in self.kafka:
            self.kafka[n].start()
        else:
            self.kraft.start(n)
        self.down.discard(n)

    def log_end(self, n: int) -> int:
        if n in self.kafka:
            try:
                batches = read_batches(self.kafka[n].metadata_dir)
            except Exception:  # a batch being written: look again
                return -1
            return batches[-1].last_offset + 1 if batches else 0
        info = kraft_info(self.kraft.addresses[n])
        return -1 if info is None else int(info.end_offset)

    def metadata_dir(self, n: int) -> object:
        if n in self.kafka:
            return self.kafka[n].metadata_dir
        return self.kraft.data_dir(n) / METADATA_DIR


def _run_mixed(procs: Procs, kraft_ids: list[int], kafka_ids: list[int]) -> None:
    cluster_id = generate_cluster_id(random.Random())
    ports = ports_for([*kraft_ids, *kafka_ids])
    voters = voters_string(ports)
    # The side in the minority times out first, so that it, too, wins elections once the
    # majority side's leader is gone (the majority side wins when the minority's leader is).
    fast, slow = (500, 1000), (1000, 2000)
    kraft_t, kafka_t = (fast, slow) if len(kraft_ids) < len(kafka_ids) else (slow, fast)
    kafka = kafka_nodes(
        procs,
        {n: ports[n] for n in kafka_ids},
        voters,
        cluster_id,
        quorum=quorum_timeouts(*kafka_t, kraft=False),
    )
    kraft = kraft_cluster(
        procs,
        {n: ports[n] for n in kraft_ids},
        voters,
        cluster_id,
        quorum=quorum_timeouts(*kraft_t, kraft=True),
    )
    m = Mixed(kraft, kafka)
    for k in kafka.values():
        k.start()
    kraft.start()

    kills: dict[str, list[str]] = {"kraft": [], "kafka": []}
    wins: dict[str, int] = {"kraft": 0, "kafka": 0}
    epoch, leader = wait_for("a first leader", m.agreed_leader, WAIT_S)
    m.commit_some(leader, first=True)
    history: list[str] = [f"epoch {epoch}: {m.side(leader)} {leader}"]

    def done() -> bool:
        return all(len(k) >= 2 for k in kills.values()) and all(w >= 1 for w in wins.values())

    for _ in range(MAX_FAILOVERS):
        if done():
            break
        side = m.side(leader)
        sig = signal.SIGKILL if len(kills[side]) % 2 == 0 else signal.SIGTERM
        kills[side].append(sig.name)
        m.take_down(leader, sig)
        old = leader
        try:
            epoch, leader = wait_for(
                f"a new leader after {sig.name} of {side} leader {old}",
                lambda old=old: (got := m.agreed_leader()) and got[1] != old and got,  # type: ignore[misc]
                WAIT_S,
            )
        except AssertionError as e:
            raise AssertionError(f"{e}\nso far:\n" + "\n".join(history)) from None
        wins[m.side(leader)] += 1
        history.append(f"{sig.name} {side} {old} -> epoch {epoch}: {m.side(leader)} {leader}")
        # Commit while the old leader is down, unless no kraft node is up to see it.
        committed = any(n not in m.down for n in kraft.node_ids)
        if committed:
            m.commit_some(leader, first=False)
        m.bring_up(old)
        epoch, leader = wait_for(f"node {old} to rejoin", m.agreed_leader, WAIT_S)
        if not committed:
            m.commit_some(leader, first=False)
    assert done(), f"not every side lost and won leaderships: {kills} {wins}\n" + "\n".join(history)

    # The end: everyone up and caught up to the HWM, then everyone stopped cleanly.
    epoch, leader = wait_for("a final leader", m.agreed_leader, WAIT_S)
    m.commit_some(leader, first=False)
    hwm = m.kraft_hwm()
    wait_for(
        f"every node to hold the log up to the HWM {hwm}",
        lambda: all(m.log_end(n) >= hwm for n in m.voters) or (m.check_kafka_alive() and False),
        WAIT_S,
    )
    codes = kraft.stop_all()
    assert set(codes.values()) == {0}, codes
    assert set(stop_kafka(kafka.values()).values()) == {True}
    m.down.update(m.voters)

    # Kafka's logs: no fatal fault (and the logging binding works: there are lines to grep).
    for n, k in kafka.items():
        assert "RaftManager" in k.log_text(), f"Kafka node {n} wrote no log lines"
        assert k.fatal_lines() == [], f"Kafka node {n}:\n" + "\n".join(k.fatal_lines())

    # Byte-identical logs below the HWM, compared batch by batch.
    logs: dict[int, list[Batch]] = {n: read_batches(m.metadata_dir(n)) for n in m.voters}  # type: ignore[arg-type]
    committed = {n: batches_below(b, hwm) for n, b in logs.items()}
    reference = committed[leader]
    assert (reference and reference[-1].last_offset + 1 == hwm) or hwm == 0
    assert [b.base_offset for b in reference] == sorted(b.base_offset for b in reference)
    for n, batches in committed.items():
        assert [b.raw for b in batches] == [b.raw for b in reference], (
            f"node {n} ({m.side(n)}) differs from leader {leader} below the HWM {hwm}"
        )

    # The simulator's invariant checkers.
    voter_set = frozenset(m.voters)
    violations, kraft_leaders, events = check_traces(
        [kraft.trace_path(n) for n in kraft.node_ids], voter_set
    )
    assert events > 0
    assert violations == []
    history_map: dict[int, set[int]] = {e: set(ids) for e, ids in kraft_leaders.items()}
    for batches in logs.values():
        for e, ids in leader_changes(batches).items():
            history_map.setdefault(e, set()).update(ids)
    final = check_final(logs, voter_set, leader, hwm, history_map, m.acked)
    assert final == [], "\n".join(str(v) for v in final)
    assert wins["kraft"] >= 1 and wins["kafka"] >= 1


def test_two_kraft_voters_and_one_kafka_voter(procs: Procs) -> None:
    _run_mixed(procs, kraft_ids=[1, 2], kafka_ids=[3])


def test_one_kraft_voter_and_two_kafka_voters(procs: Procs) -> None:
    _run_mixed(procs, kraft_ids=[1], kafka_ids=[2, 3])
