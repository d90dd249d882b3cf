"""The simulator's node lifecycle and fault layer (see refinement.sim_base for the layers): a
node starts from its persisted election state and its log, crashes (losing what its log did
not flush) or stops cleanly; partitions heal after a while. Under the disk-loss profile an
observer crashes and loses its whole data directory (log, snapshots, quorum-state) and
restarts empty; never a voter (a voter that forgets its vote may vote twice in one epoch:
KIP-853's directory ids prevent that, issue #15).
"""

from __future__ import annotations

import random
from dataclasses import replace

from kraft.core.effects import StateChanged
from kraft.core.events import Shutdown
from kraft.core.timing import QuorumTiming
from kraft.ids import ClusterId, NodeId, ReplicaKey
from kraft.storage.memory_log import MemoryLog
from kraft.storage.memory_snapshots import MemorySnapshots
from refinement.invariants_leader import state_change_after_its_action
from refinement.invariants_only_voter import only_voter_leads_at_start
from refinement.sim_base import (
    _CRASH,
    _DISK_LOSS,
    _FAULT,
    _FORCE_STOP,
    _HEAL,
    _PARTITION,
    _RECONFIG,
    _RESTART,
    _SHUTDOWN,
    _SNAPSHOT,
    _VOTER_DISK_LOSS,
    _links_json,
    _Node,
    _StopRun,
    directory_of,
)
from refinement.sim_snapshots import SimSnapshots


class SimFaults(SimSnapshots):
    """Nodes started, crashed and stopped; partitions, crashes and graceful shutdowns
    injected as the fault profile says."""

    # ------------------------------------------------------------------ node lifecycle

    def _start_node(self, node: _Node, action: str) -> None:
        # Imported here: refinement.sim (the configuration) imports this module.
        from refinement.sim_config import NodeSetup

        cfg = self.config
        rng = random.Random(f"{cfg.seed}/{node.id}/{node.inc}")
        timing = self._timing_of()
        node.start_since = self.now
        if node.snaps is not None:
            node.snaps.parts.clear()  # leftover .part files are removed at start
        setup = NodeSetup(
            node=node.key,
            cluster_id=ClusterId(cfg.cluster_id),
            voters=self._voter_keys,
            timing=timing,
            election_state=node.persisted,
            log=node.log,
            rng=rng,
            now_ms=self.now,
            snapshots=node.snaps,
            voter_history=node.voter_hist,
        )
        try:
            replica = self._factory(setup)
            node.replica = replica
            node.shutting_down = False
            node.tick_at = -1
            effects = replica.start()
        except _StopRun:
            raise
        except Exception as exc:
            self._violation(
                "ReplicaRaised", f"node {node.id} raised {type(exc).__name__} at {action}: {exc}"
            )
        self._actions.insert(0, action)
        self._apply(node, effects, None, None)
        self._timing_started(node, effects)
        self._schedule_tick(node, replica.next_deadline_ms())
        self._after_step(node, None, None, None)
        if self._check and node.replica is replica:
            # After the state it starts in, a state change comes after its action, as in any
            # step (the only voter stands as it starts).
            first = next((i for i, e in enumerate(effects) if type(e) is StateChanged), -1)
            found = state_change_after_its_action(node.id, effects[first + 1 :])
            if found is None:
                found = only_voter_leads_at_start(node.id, replica.view())
            if found is not None:
                self._violation(found.name, found.detail)

    def _timing_of(self) -> QuorumTiming:
        """The timing every replica runs with: the configuration's, with the profile's
        KIP-630 overrides and its request timeout."""
        timing = self.config.timing
        lag = self._profile.start_offset_lag_ms
        if lag is not None:
            timing = replace(timing, start_offset_lag_time_max_ms=lag)
        if self._profile.fetch_max_bytes is not None:
            timing = replace(timing, fetch_max_bytes=self._profile.fetch_max_bytes)
        if self._profile.request_timeout_ms is not None:
            timing = replace(timing, request_timeout_ms=self._profile.request_timeout_ms)
        return timing

    def _crash(self, node: _Node) -> None:
        node.replica = None
        node.log.simulate_crash()
        if self._dynamic:
            self._log_voters_changed(node, None)
        if node.snaps is not None:
            node.snaps.parts.clear()  # a snapshot being fetched is lost; complete ones stay
        node.log_dirty = True
        self.result.crashes += 1
        self._node_stopped(node, "Crash")

    def _current_voters(self) -> frozenset[ReplicaKey]:
        """The dynamic quorum's voter set: refinement.sim_reconfig."""
        raise NotImplementedError

    def _voter_disk_loss(self) -> None:
        """A running voter loses its disk: refinement.sim_reconfig."""
        raise NotImplementedError

    def _reconfig_fault(self) -> None:
        """The operator's next voter change: refinement.sim_reconfig."""
        raise NotImplementedError

    def _crash_aimed(self, node: _Node, payload: object) -> None:
        """A crash aimed at one incarnation right after a step of a snapshot transfer (named
        by its effect), if it still runs and may stop."""
        assert isinstance(payload, tuple)
        inc, step = payload
        if self._liveness or node.replica is None or node.inc != inc or node.shutting_down:
            return
        if self._may_stop(node):
            steps = self.result.transfer_crashes
            steps[step] = steps.get(step, 0) + 1
            self._crash(node)

    def _lose_disk(self, node: _Node) -> None:
        """The node crashes and its data directory is gone: it restarts empty (under a
        dynamic quorum formatted anew: a new directory id, so a new replica key)."""
        node.replica = None
        node.log = MemoryLog()
        node.snaps = MemorySnapshots() if self._profile.snapshots or not self._dynamic else None
        node.persisted = None
        node.wiped += 1
        if self._dynamic:
            self._lost[node.key] = node.snap
            node.key = ReplicaKey(node.id, directory_of(node.id, node.wiped))
            self._log_voters_changed(node, None)
        node.log_dirty = True
        self.result.disk_losses += 1
        self._node_stopped(node, "LoseDisk")

    def _node_stopped(self, node: _Node, action: str) -> None:
        # A new incarnation: messages and timers aimed at the old one die with it (its
        # connections closed), and the next start derives a fresh generator from it.
        node.inc += 1
        self._timing_stopped(node)
        self._ledger.stopped(node.id)
        node.shutting_down = False
        node.stop_requested = False
        node.tick_at = -1
        self._retry_inflight(node)
        old = node.snap
        new = self._snapshot(node)
        node.snap = new
        self._snaps[node.id] = new
        self._sim_event(action, node, None)
        if self._check:
            self._check_node(old, new)
        lo, hi = self._profile.down_ms
        down = lo + int(self._rng.random() * (hi - lo + 1))
        self._push(self.now + (0 if self._liveness else down), _RESTART, node, node.inc)

    # ------------------------------------------------------------------ faults

    def _fault(self, kind: str) -> None:
        p = self._profile
        if kind == _PARTITION:
            self._partition()
            self._push(self.now + self._exp_ms(p.partition_rate), _FAULT, kind)
        elif kind == _CRASH:
            victim = self._pick_victim()
            if victim is not None:
                self._crash(victim)
            self._push(self.now + self._exp_ms(p.crash_rate), _FAULT, kind)
        elif kind == _SHUTDOWN:
            victim = self._pick_victim()
            if victim is not None:
                self._shutdown(victim)
            self._push(self.now + self._exp_ms(p.shutdown_rate), _FAULT, kind)
        elif kind == _SNAPSHOT:
            self._snapshot_fault()
        elif kind == _DISK_LOSS:
            up = [
                n
                for n in self._nodes.values()
                if not n.is_voter and n.replica is not None and not n.shutting_down
            ]
            if up:
                self._lose_disk(up[int(self._rng.random() * len(up))])
            self._push(self.now + self._exp_ms(p.disk_loss_rate), _FAULT, kind)
        elif kind == _VOTER_DISK_LOSS:
            self._voter_disk_loss()
            self._push(self.now + self._exp_ms(p.voter_disk_loss_rate), _FAULT, kind)
        elif kind == _RECONFIG:
            self._reconfig_fault()

    def _pick_victim(self) -> _Node | None:
        up = [n for n in self._nodes.values() if n.replica is not None and not n.shutting_down]
        if not up:
            return None
        victim = up[int(self._rng.random() * len(up))]
        return victim if self._may_stop(victim) else None

    def _may_stop(self, node: _Node) -> bool:
        """An observer may always stop; a voter while fewer than the profile's cap are down
        (under a dynamic quorum: the voters of the latest voter set, a voter whose directory
        was lost counted as down)."""
        voters = self._voter_ids
        if self._dynamic:
            keys = self._current_voters()
            if node.key not in keys:
                return True
            voters = tuple(k.id for k in keys if self._nodes[k.id].key == k)
            dead = len(keys) - len(voters)
        elif not node.is_voter:
            return True
        else:
            dead = 0
        cap = self._profile.max_down
        if cap is None:
            cap = (len(voters) + dead - 1) // 2
        down = dead + sum(
            1 for i in voters if self._nodes[i].replica is None or self._nodes[i].shutting_down
        )
        return down < cap

    def _shutdown(self, node: _Node) -> None:
        self.result.shutdowns += 1
        node.shutting_down = True
        inc = node.inc
        timeout = 2 * self.config.timing.request_timeout_ms
        self._push(self.now + timeout, _FORCE_STOP, node, inc)
        if self._check:
            self._ledger.shutdown_asked(node.id, self.now)
        self._step(node, Shutdown(self.now), None, None, None)

    def _partition(self) -> None:
        rng = self._rng
        ids = list(self._nodes)
        if len(ids) < 2:
            return
        links: list[tuple[NodeId, NodeId]] = []
        if rng.random() < self._profile.one_way_fraction:
            a = ids[int(rng.random() * len(ids))]
            others = [i for i in ids if i != a]
            b = others[int(rng.random() * len(others))]
            links.append((a, b))
        else:
            rng.shuffle(ids)
            cut = 1 + int(rng.random() * (len(ids) - 1))
            side_a, side_b = sorted(ids[:cut]), sorted(ids[cut:])
            for x in side_a:
                for y in side_b:
                    links += [(x, y), (y, x)]
        pid = self._seq
        self._partitions[pid] = links
        for link in links:
            self._blocked[link] = self._blocked.get(link, 0) + 1
        self.result.partitions += 1
        lo, hi = self._profile.partition_ms
        self._push(self.now + lo + int(rng.random() * (hi - lo + 1)), _HEAL, pid)
        self._sim_event(
            "Partition", None, {"type": "Partition", "id": pid, "links": _links_json(links)}
        )

    def _heal(self, pid: int) -> None:
        links = self._partitions.pop(pid, None)
        if links is None:
            return
        for link in links:
            left = self._blocked[link] - 1
            if left:
                self._blocked[link] = left
            else:
                del self._blocked[link]
        self._sim_event("Heal", None, {"type": "Heal", "id": pid, "links": _links_json(links)})
