"""The simulator's liveness phase (see refinement.sim_base for the layers). It heals every
partition, restarts stopped nodes, stops losing, duplicating and holding messages (the +delays
fault; slow snapshot validation stops too: refinement.sim_snapshots), then requires within
a bound a leader that every voter follows (EventuallyLeaderElected), a fresh probe append
acknowledged, and every client append answered and decided (EventuallyCommitted). Under a
profile where observers lose their disk, every observer must then also catch up: hold the
settled leader's log up to its HWM, and know that HWM (EventuallyCaughtUp).

An append accepted by an incarnation that crashed is decided here, from the settled leader's
log: the core that would have decided it died with that incarnation. So is one a live replica
has not decided by the end (it has not caught up yet; its core would decide the same).
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING, NoReturn

from kraft.core.vocabulary import ReplicaState
from kraft.ids import NodeId
from refinement import invariants as inv
from refinement import invariants_reconfig as recon
from refinement import invariants_voter_changes as vc
from refinement.sim_base import _StopRun
from refinement.sim_clients import _ClientRequest
from refinement.sim_reconfig import SimReconfig

if TYPE_CHECKING:
    from refinement.sim_config import ReplicaFactory, SimConfig, SimResult


class SimLiveness(SimReconfig):
    """After the fault phase: heal, restart, and require a stable leader and every append
    decided within the bound."""

    def __init__(
        self,
        config: SimConfig,
        result: SimResult,
        replica_factory: ReplicaFactory,
        trace: IO[str] | None,
    ) -> None:
        super().__init__(config, result, replica_factory, trace)
        self._liveness_deadline = 0
        self._liveness_start = 0
        self._stable_leader: NodeId | None = None

    # ------------------------------------------------------------------ liveness

    def _start_liveness(self) -> None:
        self._liveness = True
        self._liveness_start = self.now
        self._liveness_deadline = self.now + self.config.liveness_bound
        self._loss = 0.0
        self._duplicate = 0.0
        # Nor are answers held to a timer's edge any more (the +delays fault), as snapshot
        # validation is no longer slow: a held answer is a network fault (the requester waits
        # out its request timeout, then retries) and healing ends network faults. Kept on, it
        # made a follower's catch-up cost a request timeout in about one Fetch in seven (a
        # follower, in Kafka too, waits out its Fetch's request timeout), so the time to
        # decide every append grew with the backlog the fault phase left, which no fixed
        # bound covers: in mixed+snapshots+delays seed 32 a voter 670 records behind needs
        # about 30 Fetches of 1 KiB, 26 answers were held about 2 s each, and the appends of
        # the new leader's epoch were still uncommitted at the bound. Answers held in the
        # fault phase still arrive late in this one.
        self._hold = 0.0
        self._hold_past = 0.0  # likewise; those held are released by their time limit
        for pid in sorted(self._partitions):
            self._heal(pid)
        for node in self._nodes.values():
            if node.replica is None:
                self._start_node(node, "Restart")
        self._liveness_progress()

    def _liveness_progress(self) -> None:
        leader = self._stable_leader
        if leader is not None and self._snaps[leader].state is not ReplicaState.LEADER:
            leader = self._stable_leader = None  # leadership moved after it settled
        if leader is None:
            leader = self._find_stable_leader()
            if leader is None:
                return
            self._stable_leader = leader
            if self.result.recovery_ms is None:
                self.result.recovery_ms = self.now - self._liveness_start
            # A fresh probe for each settled leader: one accepted by a former leader may
            # never be acknowledged (it is decided below like any other append).
            rid = self._next_rid
            self._next_rid += 1
            self._probe = rid
            req = _ClientRequest(rid, (b"probe",), leader)
            self._pending[rid] = req
            self._client_dispatch(req, self.now)
            return
        if self._probe is not None or self._pending:
            return
        if self._profile.disk_loss_rate and self._lagging_observers(leader):
            return  # before deciding leftovers: a live replica may still decide them itself
        snap = self._snaps[leader]
        accepted = self._accepted
        if any(a[3] >= snap.epoch for a in accepted.values()):
            return  # still awaiting its acknowledgement
        if self._dynamic and self._voter_change_pending(snap):
            return  # ReconfigEventuallyCompletes: its latest voter change must commit first
        if (
            self._dynamic
            and snap.key is not None
            and not self._probe_change(snap.voter_history[-1][1], snap.key)
        ):
            return  # VoterChangeEventuallyAcknowledged: one more change, acknowledged
        # What is still undecided was accepted by an incarnation that died with it (or by a
        # live replica that has not caught up yet: its core would decide the same). Decided
        # only now, all at once: a live replica may still decide one itself meanwhile.
        for rid, (_nid, _first, last, epoch, _at, _inc) in list(accepted.items()):
            # An older epoch is decided once the leader committed in its own epoch (the
            # probe): either that record is in the committed log or it never will be.
            if inv.epoch_at(snap.epochs, snap.log_end_offset, last) != epoch:
                self.result.lost += 1
            del accepted[rid]
        self._check_producer_logs()
        raise _StopRun

    @staticmethod
    def _voter_change_pending(leader: inv.NodeState) -> bool:
        """The leader's latest Voters record is not committed yet."""
        last = max(recon.voter_record_offsets(leader), default=-1)
        hwm = leader.high_watermark
        return last >= 0 and (hwm is None or last >= hwm)

    def _lagging_observers(self, leader: NodeId) -> list[NodeId]:
        """Observers that do not hold the settled leader's log up to its HWM, or do not know
        that HWM yet."""
        lead = self._snaps[leader]
        hwm = lead.high_watermark or 0
        out = []
        for nid, node in self._nodes.items():
            if node.is_voter:
                continue
            s = self._snaps[nid]
            agreed = inv.common_prefix(s.epochs, s.log_end_offset, lead.epochs, lead.log_end_offset)
            if not s.up or s.high_watermark is None or s.high_watermark < hwm or agreed < hwm:
                out.append(nid)
        return out

    def _find_stable_leader(self) -> NodeId | None:
        leaders = [s for s in self._snaps.values() if s.state is ReplicaState.LEADER]
        if len(leaders) != 1:
            return None
        leader = leaders[0]
        if self._dynamic:
            return self._settled_dynamic(leader)
        for vid in self._voter_ids:
            s = self._snaps[vid]
            if vid == leader.node_id:
                continue
            if s.state is None or s.epoch != leader.epoch or s.leader_id != leader.node_id:
                return None
        return leader.node_id

    def _settled_dynamic(self, leader: inv.NodeState) -> NodeId | None:
        """A dynamic quorum's leader is settled once it is one of its voters and every voter
        of its voter set that still exists (its directory not lost) follows it."""
        voters = leader.voter_history[-1][1]
        if leader.key not in voters.voters:
            return None  # a removed leader resigns once its removal commits
        for key in voters:
            s = self._snaps[key.id]
            if key.id == leader.node_id or self._nodes[key.id].key != key:
                continue
            if s.state is None or s.epoch != leader.epoch or s.leader_id != leader.node_id:
                return None
        return leader.node_id

    def _liveness_failed(self) -> NoReturn:
        bound = self.config.liveness_bound
        if self._stable_leader is None:
            states = ", ".join(
                f"{s.node_id}:{'Down' if s.state is None else s.state.value}@{s.epoch}"
                f"->{s.leader_id}"
                for s in self._snaps.values()
            )
            self._violation(
                inv.EVENTUALLY_LEADER_ELECTED,
                f"no leader followed by every voter within {bound}ms of healing ({states})",
            )
        leader = self._snaps[self._stable_leader]
        if self._probe is None and not self._pending and self._profile.disk_loss_rate:
            lagging = self._lagging_observers(leader.node_id)
            if lagging:
                self._violation(
                    inv.EVENTUALLY_CAUGHT_UP,
                    f"within {bound}ms of healing, observers {lagging} did not catch up with"
                    f" leader {leader.node_id} (epoch {leader.epoch}, HWM"
                    f" {leader.high_watermark}): "
                    + ", ".join(
                        f"{i}: log {self._snaps[i].log_start_offset}.."
                        f"{self._snaps[i].log_end_offset} HWM {self._snaps[i].high_watermark}"
                        for i in lagging
                    ),
                )
        current = sorted(r for r, a in self._accepted.items() if a[3] >= leader.epoch)
        probe = self._change_probe
        if (
            probe is not None
            and not self._change_probed
            and not current
            and self._probe is None
            and not self._pending
        ):
            v = vc.eventually_acknowledged(probe.voter, probe.add, bound, probe.answers)
            self._violation(v.name, v.detail)
        if (
            self._dynamic
            and not current
            and self._probe is None
            and not self._pending
            and self._voter_change_pending(leader)
        ):
            self._violation(
                recon.RECONFIG_EVENTUALLY_COMPLETES,
                f"within {bound}ms of healing, leader {leader.node_id} (epoch"
                f" {leader.epoch}, HWM {leader.high_watermark}) did not commit its latest"
                f" Voters record (at {max(recon.voter_record_offsets(leader))})",
            )
        self._violation(
            inv.EVENTUALLY_COMMITTED,
            f"within {bound}ms of healing, leader {leader.node_id} (epoch {leader.epoch}, HWM"
            f" {leader.high_watermark}): probe {self._probe} acknowledged={self._probe is None},"
            f" unanswered requests {sorted(self._pending)[:10]}, accepted in its epoch but"
            f" unacknowledged {current[:10]}",
        )
