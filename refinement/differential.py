"""Differential machines for the core's pure helpers: the helper against a plain reference
model, over random operation sequences (hypothesis), every answer compared after every step.

The cluster machine (refinement.stateful) and the simulator only see a helper through the
replica, which calls it in a few well-worn ways; a wrong answer in a case the replica reaches
rarely (an append accepted after the HWM passed it, a driver stating a snapshot already below
the log start, the voter set a snapshot installs) can hide there for long. Here each helper
meets its own contract, as its docstring states it, written the simple way: lists and dicts,
no bisection, no caches.

- `LogMetadataMachine`: kraft.core.log_metadata.LogMetadata against `_LogModel` (the records'
  epochs by offset, the snapshots held, the voter-set history), through append, truncate
  (never below the latest snapshot: the replica truncates only above its HWM, snapshots are
  taken at most at it), add_snapshot, advance_start (and its refusal of an offset that is no
  snapshot after the start), install_snapshot, and a restart from the LogState a driver
  would state (with an old snapshot below the start that the driver has not deleted yet).
  Its epoch cache (`epoch_entries`) is compared with Kafka's LeaderEpochFileCache changed the
  way Kafka changes it (assign, truncateFromEnd, truncateFromStart, cleared by
  truncateFullyAndStartAt, read back at a restart and truncated from the log end): an empty
  log keeps the entry truncateFromStart moved to its start until the next restart.
- `CommitRuleMachine`: kraft.core.commits.CommitRule against a list of the accepted appends,
  through accepted, high_watermark_raised and truncated, with a log whose epochs change.
- `QuorumMathMachine`: kraft.core.quorum_math on Python ints (`PY`, what the replica calls;
  refinement.smt proves its lemmas over z3 terms of the same bodies) against the formulas its
  docstrings state: the HWM as the majority-th largest end offset for every majority from 1
  to the number of voters (the replica's fast path too), majority sizes, timeout and backoff
  bounds, KIP-595's successor backoff, log comparison; and kraft.core.java_order.int32
  against Java's (int) narrowing of a long (the low four bytes read as a signed int).
- `HashOrderMachine`: kraft.core.java_order.hash_order (a closed form: the final table size,
  then a stable sort by bucket) against `_JavaHashMap`, which puts the keys one at a time as
  Java's HashMap.putVal does: a bucket grows at its tail, the table doubles once the size
  passes three quarters of it, and each bucket splits into its low and high halves in order.

`run_all` runs them all, derandomized; the mutation campaign's hypothesis layer runs it after the
cluster machine (refinement.mutation.layers).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kraft.core import quorum_math as qm
from kraft.core.commits import AppendDecided, CommitRule
from kraft.core.effects import AppendCommitted, AppendLost
from kraft.core.java_order import hash_order, int32
from kraft.core.log_metadata import STATIC_VOTERS_OFFSET, LogMetadata, LogState
from kraft.core.voter_set import VoterSet
from kraft.ids import Epoch, NodeId, Offset, OffsetAndEpoch, ReplicaKey

_VOTER_SETS: tuple[VoterSet, ...] = tuple(
    VoterSet(tuple(ReplicaKey(NodeId(i)) for i in ids)) for ids in ((1,), (1, 2, 3), (2, 3), (1, 4))
)

# ----------------------------------------------------------------------------- LogMetadata


@dataclass(slots=True)
class _LogModel:
    start: int = 0
    end: int = 0
    records: dict[int, int] = field(default_factory=dict)  # offset -> epoch, start <= o < end
    snapshots: dict[int, int] = field(default_factory=dict)  # end offset -> epoch
    voters: list[tuple[int, VoterSet]] = field(default_factory=list)  # (offset, set)
    deleted: list[OffsetAndEpoch] = field(default_factory=list)  # snapshots left behind
    # Kafka's LeaderEpochFileCache for this log, (epoch, start offset) in order, changed as
    # Kafka changes it (`kafka_*` below); what the driver's leader-epoch-checkpoint holds.
    cache: list[tuple[int, int]] = field(default_factory=list)

    def kafka_assign(self, epoch: int, start: int) -> None:
        """assign: nothing if the last entry has this epoch and starts at or before `start`
        (isUpdateNeeded); else the entries from the end with an epoch at or after it, or
        starting at or after `start`, go (maybeTruncateNonMonotonicEntries) and it is added."""
        if self.cache and self.cache[-1][0] == epoch and start >= self.cache[-1][1]:
            return
        while self.cache and (self.cache[-1][0] >= epoch or self.cache[-1][1] >= start):
            self.cache.pop()
        self.cache.append((epoch, start))

    def kafka_truncate_from_end(self, end: int) -> None:
        """truncateFromEnd: the entries starting at or after `end` go."""
        self.cache = [(e, s) for e, s in self.cache if s < end]

    def kafka_truncate_from_start(self, start: int) -> None:
        """truncateFromStart: the entries starting at or before `start` go, and the last of
        them comes back starting at `start` (whatever the log end)."""
        gone = [(e, s) for e, s in self.cache if s <= start]
        self.cache = [(e, s) for e, s in self.cache if s > start]
        if gone:
            self.cache.insert(0, (gone[-1][0], start))

    def last_epoch(self) -> int:
        if self.end - 1 in self.records:
            return self.records[self.end - 1]
        return self.snapshots.get(self.end, 0)

    def epochs(self) -> list[tuple[int, int]]:
        """(epoch, first offset) of the records held, in log order."""
        out: list[tuple[int, int]] = []
        for o in range(self.start, self.end):
            if not out or out[-1][0] != self.records[o]:
                out.append((self.records[o], o))
        return out

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        runs = self.epochs()
        below = [i for i, (e, _) in enumerate(runs) if e <= epoch]
        if not below:
            snap = self.snapshots.get(self.start)
            if snap is not None:
                return OffsetAndEpoch(Epoch(snap), Offset(self.start))
            return OffsetAndEpoch(Epoch(epoch), Offset(self.start))
        i = below[-1]
        ends = runs[i + 1][1] if i + 1 < len(runs) else self.end
        return OffsetAndEpoch(Epoch(runs[i][0]), Offset(ends))

    def voters_at(self, offset: int) -> VoterSet:
        found = self.voters[0][1]
        for o, v in self.voters:
            if o <= offset:
                found = v
        return found

    def snapshot_ids(self) -> tuple[OffsetAndEpoch, ...]:
        return tuple(OffsetAndEpoch(Epoch(e), Offset(o)) for o, e in sorted(self.snapshots.items()))

    def state(self, with_deleted: bool) -> LogState:
        """The LogState a driver holding this log states at a restart."""
        old = [s for s in self.deleted if s.offset < self.start][-1:] if with_deleted else []
        return LogState(
            Offset(self.start),
            Offset(self.end),
            tuple((Epoch(e), Offset(o)) for e, o in self.cache),
            snapshots=self.snapshot_ids() + tuple(old),
            voter_history=tuple((Offset(o), v) for o, v in self.voters),
        )


class LogMetadataMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model = _LogModel(voters=[(int(STATIC_VOTERS_OFFSET), _VOTER_SETS[0])])
        self.log = LogMetadata(LogState(Offset(0), Offset(0)), _VOTER_SETS[0])
        # What the log held at each version it showed: `version` is bumped by every change
        # (ViewCache keys its views on it), so a version seen again must mean the same contents.
        self.seen: dict[int, tuple[object, ...]] = {}

    @rule(
        sizes=st.lists(st.integers(1, 3), min_size=1, max_size=3),
        bumps=st.lists(st.integers(0, 2), min_size=3, max_size=3),
        voters=st.lists(st.tuples(st.integers(0, 8), st.integers(0, 3)), max_size=2),
    )
    def append(self, sizes: list[int], bumps: list[int], voters: list[tuple[int, int]]) -> None:
        m = self.model
        epoch, base = m.last_epoch(), m.end
        batches: list[tuple[Epoch, Offset]] = []
        for size, bump in zip(sizes, bumps, strict=False):
            epoch += bump
            batches.append((Epoch(epoch), Offset(base)))
            for o in range(base, base + size):
                m.records[o] = epoch
            m.kafka_assign(epoch, base)
            base += size
        sets: list[tuple[Offset, VoterSet]] = []
        for at, which in sorted({m.end + a % (base - m.end): w for a, w in voters}.items()):
            sets.append((Offset(at), _VOTER_SETS[which]))
            m.voters.append((at, _VOTER_SETS[which]))
        self.log.append(batches, Offset(base), sets)
        m.end = base

    @rule(data=st.data())
    def append_refused(self, data: st.DataObject) -> None:
        """append refuses (ValueError) a batch whose epoch is below the epoch cache's last,
        and a voter set outside the records appended: before the end, or at or past the next
        offset. Tried on a log restarted from the model's LogState, since a refused append
        may already have assigned the batches before the bad one."""
        m = self.model
        log = LogMetadata(m.state(False), _VOTER_SETS[0])
        entries = log.epoch_entries()
        end, size = m.end, data.draw(st.integers(1, 3))
        if entries and entries[-1][0] > 0 and data.draw(st.booleans()):
            epoch = data.draw(st.integers(0, entries[-1][0] - 1))
            batches, sets = [(Epoch(epoch), Offset(end))], []
        else:
            bad = [end + size, end + size + 1] + ([end - 1] if end > 0 else [])
            at = Offset(data.draw(st.sampled_from(bad)))
            batches, sets = [(log.last_epoch, Offset(end))], [(at, _VOTER_SETS[1])]
        try:
            log.append(batches, Offset(end + size), sets)
        except ValueError:
            return
        raise AssertionError(f"append {batches} with voter sets at {[o for o, _ in sets]} accepted")

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        m = self.model
        floor = max([m.start, *m.snapshots])
        offset = data.draw(st.integers(floor, m.end + 1))
        self.log.truncate(Offset(offset))
        if offset >= m.end:
            return
        m.records = {o: e for o, e in m.records.items() if o < offset}
        m.voters = m.voters[:1] + [(o, v) for o, v in m.voters[1:] if o < offset]
        m.kafka_truncate_from_end(offset)
        m.end = max(offset, m.start)

    @precondition(lambda self: self.model.end > self.model.start)
    @rule(data=st.data())
    def add_snapshot(self, data: st.DataObject) -> None:
        m = self.model
        offset = data.draw(st.integers(m.start + 1, m.end))
        epoch = m.records[offset - 1]
        self.log.add_snapshot(OffsetAndEpoch(Epoch(epoch), Offset(offset)))
        m.snapshots[offset] = epoch

    @precondition(lambda self: any(o > self.model.start for o in self.model.snapshots))
    @rule(data=st.data())
    def advance_start(self, data: st.DataObject) -> None:
        m = self.model
        offset = data.draw(st.sampled_from(sorted(o for o in m.snapshots if o > m.start)))
        self.log.advance_start(Offset(offset))
        m.deleted += [
            OffsetAndEpoch(Epoch(e), Offset(o)) for o, e in m.snapshots.items() if o < offset
        ]
        m.snapshots = {o: e for o, e in m.snapshots.items() if o >= offset}
        m.records = {o: e for o, e in m.records.items() if o >= offset}
        m.start = offset
        m.kafka_truncate_from_start(offset)

    @rule(data=st.data())
    def advance_start_refused(self, data: st.DataObject) -> None:
        """An offset that is no snapshot held after the start (the start itself included)."""
        m = self.model
        offset = data.draw(st.integers(max(m.start - 1, 0), m.end + 1))
        if offset in m.snapshots and m.start < offset <= m.end:
            return
        try:
            self.log.advance_start(Offset(offset))
        except ValueError:
            return
        raise AssertionError(f"advance_start({offset}) accepted on {m.start}..{m.end}")

    @rule(ahead=st.integers(0, 4), bump=st.integers(0, 2), which=st.integers(0, 3))
    def install_snapshot(self, ahead: int, bump: int, which: int) -> None:
        m = self.model
        end = max(m.start, m.end + ahead - 2)
        epoch = m.last_epoch() + bump
        self.log.install_snapshot(OffsetAndEpoch(Epoch(epoch), Offset(end)), _VOTER_SETS[which])
        m.deleted += [OffsetAndEpoch(Epoch(e), Offset(o)) for o, e in m.snapshots.items()]
        m.start = m.end = end
        m.records = {}
        m.snapshots = {end: epoch}
        m.voters = [(end - 1, _VOTER_SETS[which])]
        m.cache = []  # truncateFullyAndStartAt clears the cache

    @rule(with_deleted=st.booleans())
    def restart(self, with_deleted: bool) -> None:
        m = self.model
        static = _VOTER_SETS[0]
        self.log = LogMetadata(m.state(with_deleted), static)
        self.seen = {}
        # Kafka's LogLoader: the checkpoint read back, truncated from the log end, then from
        # the log start.
        m.kafka_truncate_from_end(m.end)
        m.kafka_truncate_from_start(m.start)
        if m.voters[0][0] != int(STATIC_VOTERS_OFFSET):
            m.voters = [(int(STATIC_VOTERS_OFFSET), static), *m.voters]

    @rule(data=st.data())
    def restart_refused(self, data: st.DataObject) -> None:
        """A LogState whose voter history is out of order is refused (ValueError), and the
        replica keeps the log it had: after the entries at -1 (the bootstrap's), the offsets
        must increase strictly and stay below the log end. Here the history a driver would
        state, with one bad entry added at its end: the last offset again, one below it, or
        one at or past the log end."""
        m = self.model
        good = m.state(False)
        history = list(good.voter_history)
        last = int(history[-1][0])
        kinds = ["past-end"]
        if last >= 0:
            kinds.append("repeat")
        if last >= 1:
            kinds.append("backwards")
        kind = data.draw(st.sampled_from(kinds))
        if kind == "repeat":
            offset = last
        elif kind == "backwards":
            offset = data.draw(st.integers(0, last - 1))
        else:
            offset = data.draw(st.integers(m.end, m.end + 2))
        history.append((Offset(offset), _VOTER_SETS[data.draw(st.integers(0, 3))]))
        bad = LogState(
            good.start_offset,
            good.end_offset,
            good.epochs,
            snapshots=good.snapshots,
            voter_history=tuple(history),
        )
        try:
            LogMetadata(bad, _VOTER_SETS[0])
        except ValueError:
            return
        raise AssertionError(f"voter history {[o for o, _ in history]} accepted ({kind})")

    @invariant()
    def version_tells_changes(self) -> None:
        log = self.log
        now = (log.start_offset, log.end, log.snapshots, log.voters_offset, log.voters)
        was = self.seen.setdefault(log.version, now)
        assert was == now, ("version", log.version, "held", was, "now", now)

    @invariant()
    def agrees(self) -> None:
        m, log = self.model, self.log
        got_range = (log.start_offset, log.end_offset)
        assert got_range == (m.start, m.end), ("start, end", got_range)
        assert log.last_epoch == m.last_epoch(), ("last_epoch", log.last_epoch)
        assert log.end == OffsetAndEpoch(Epoch(m.last_epoch()), Offset(m.end)), ("end", log.end)
        ids = m.snapshot_ids()
        assert log.snapshots == ids, (log.snapshots, ids)
        assert log.latest_snapshot == (ids[-1] if ids else None), "latest_snapshot"
        assert log.earliest_snapshot == (ids[0] if ids else None), "earliest_snapshot"
        for o in range(max(m.start - 2, 0), m.end + 2):
            want = m.records.get(o) if m.start <= o < m.end else None
            assert log.epoch_at(Offset(o)) == want, ("epoch_at", o)
            snap = m.snapshots.get(o)
            want_snap = None if snap is None else OffsetAndEpoch(Epoch(snap), Offset(o))
            assert log.snapshot_at(Offset(o)) == want_snap, ("snapshot_at", o)
        cache = tuple((Epoch(e), Offset(o)) for e, o in m.cache)
        assert log.epoch_entries() == cache, ("epoch_entries", log.epoch_entries(), cache)
        for e in range(m.last_epoch() + 2):
            got = log.end_offset_for_epoch(Epoch(e))
            assert got == m.end_offset_for_epoch(e), ("end_offset_for_epoch", e, got)
        assert log.voters_offset == m.voters[-1][0], ("voters_offset", log.voters_offset)
        assert log.voters == m.voters[-1][1], ("voters", log.voters)
        for o in range(m.start - 1, m.end + 1):
            assert log.voters_at(Offset(o)) == m.voters_at(o), ("voters_at", o)


# ----------------------------------------------------------------------------- CommitRule


def _decide(a: tuple[int, int, int, int], log: dict[int, int]) -> AppendCommitted | AppendLost:
    last, rid, first, epoch = a
    if log.get(last) == epoch:
        return AppendCommitted(rid, Offset(first), Offset(last), Epoch(epoch))
    return AppendLost(rid, Offset(first), Offset(last), Epoch(epoch))


class _Log:
    """An EpochLookup over a dict."""

    def __init__(self, epochs: dict[int, int]) -> None:
        self.epochs = epochs

    def epoch_at(self, offset: Offset) -> Epoch | None:
        e = self.epochs.get(offset)
        return None if e is None else Epoch(e)


class CommitRuleMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.rule_ = CommitRule()
        self.undecided: list[tuple[int, int, int, int]] = []  # (last, id, first, epoch)
        self.epochs: dict[int, int] = {}
        self.hwm: int | None = None
        self.next_id = 0

    def _check(self, got: list[AppendDecided], want: list[AppendDecided]) -> None:
        assert got == want, (got, want)
        assert len(self.rule_) == len(self.undecided), ("len", len(self.rule_))

    @rule(first=st.integers(0, 12), size=st.integers(0, 3), epoch=st.integers(1, 3))
    def accepted(self, first: int, size: int, epoch: int) -> None:
        last = first + size
        rid = self.next_id
        self.next_id += 1
        hwm = None if self.hwm is None else Offset(self.hwm)
        got = self.rule_.accepted(
            rid,
            Offset(first),
            Offset(last),
            Epoch(epoch),
            high_watermark=hwm,
            log=_Log(self.epochs),
        )
        self.undecided.append((last, rid, first, epoch))
        want: list[AppendDecided] = []
        if self.hwm is not None and last < self.hwm:
            want = self._raise(self.hwm)
        self._check(got, want)

    def _raise(self, hwm: int) -> list[AppendDecided]:
        due = sorted(a for a in self.undecided if a[0] < hwm)
        self.undecided = [a for a in self.undecided if a[0] >= hwm]
        return [_decide(a, self.epochs) for a in due]

    @rule(up=st.integers(0, 4))
    def high_watermark_raised(self, up: int) -> None:
        hwm = (self.hwm or 0) + up
        self.hwm = hwm
        got = self.rule_.high_watermark_raised(Offset(hwm), _Log(self.epochs))
        self._check(got, self._raise(hwm))

    @rule(offset=st.integers(0, 16))
    def truncated(self, offset: int) -> None:
        got = self.rule_.truncated(Offset(offset))
        gone = sorted(a for a in self.undecided if a[0] >= offset)
        self.undecided = [a for a in self.undecided if a[0] < offset]
        want: list[AppendDecided] = [
            AppendLost(rid, Offset(first), Offset(last), Epoch(e)) for last, rid, first, e in gone
        ]
        self._check(got, want)

    @rule(offset=st.integers(0, 16), epoch=st.integers(0, 3))
    def log_changes(self, offset: int, epoch: int) -> None:
        if epoch == 0:
            self.epochs.pop(offset, None)
        else:
            self.epochs[offset] = epoch


# ----------------------------------------------------------------------------- quorum_math


def _java_int(x: int) -> int:
    """Java's (int) of a long: its low four bytes, read as a two's complement int."""
    return int.from_bytes((x & 0xFFFFFFFF).to_bytes(4, "little"), "little", signed=True)


class QuorumMathMachine(RuleBasedStateMachine):
    """The quorum arithmetic on plain ints against the formulas it is documented by."""

    @rule(
        ends=st.lists(st.integers(-1, 40), min_size=1, max_size=7),
        pick=st.integers(0, 6),
    )
    def high_watermark(self, ends: list[int], pick: int) -> None:
        n = len(ends)
        majority = qm.majority_size(qm.PY, n)
        assert majority == n // 2 + 1, f"majority_size({n}) = {majority}"
        ranked = sorted(ends, reverse=True)
        for k in (majority, 1 + pick % n, n):
            want = ranked[k - 1]
            got = qm.high_watermark(qm.PY, ends, k)
            fast = qm.high_watermark_fast(ends, k)
            assert got == want == fast, f"HWM of {ends}, {k}-th largest: {got}/{fast}, not {want}"
        for bad in (0, n + 1):
            for fast_path in (False, True):
                try:
                    if fast_path:
                        qm.high_watermark_fast(ends, bad)
                    else:
                        qm.high_watermark(qm.PY, ends, bad)
                except ValueError:
                    continue
                raise AssertionError(f"an HWM of the {bad}-th of {n} end offsets was computed")

    @rule(t=st.integers(0, 5000), draw=st.integers(0, 4999))
    def election_timeouts(self, t: int, draw: int) -> None:
        bounds = qm.election_timeout_bounds(qm.PY, t)
        want = (t, 2 * t - 1) if t > 0 else (0, 0)
        assert bounds == want, f"election timeout bounds of {t}: {bounds}, not {want}"
        d = draw % t if t > 0 else 0
        got = qm.randomized_election_timeout(qm.PY, t, d)
        assert got == (t + d if t > 0 else 0), f"election timeout {t} + {d}: {got}"
        assert bounds[0] <= got <= max(bounds[1], 0)
        assert qm.randomized_fetch_timeout(qm.PY, t, d) == t + d

    @rule(
        position=st.integers(0, 6),
        retry=st.integers(0, 200),
        backoff_max=st.integers(0, 3000),
    )
    def backoffs(self, position: int, retry: int, backoff_max: int) -> None:
        got = qm.successor_backoff_ms(qm.PY, position, retry, backoff_max)
        want = 0 if position <= 0 else min(backoff_max, retry * 2 ** (position - 1))
        assert got == want, f"successor {position} backoff ({retry}, max {backoff_max}): {got}"
        lo, hi = qm.election_backoff_bounds(qm.PY, backoff_max)
        assert (lo, hi) == (1, max(1, backoff_max)), f"election backoff bounds: {lo}, {hi}"

    @rule(
        a=st.tuples(st.integers(0, 4), st.integers(0, 6)),
        b=st.tuples(st.integers(0, 4), st.integers(0, 6)),
    )
    def logs_compared(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        got = qm.log_up_to_date(qm.PY, a[0], a[1], b[0], b[1])
        assert got == (a >= b), f"log {a} at least as up-to-date as {b}: {got}"
        assert qm.min_of(qm.PY, a[0], b[0]) == min(a[0], b[0])
        assert qm.max_of(qm.PY, a[0], b[0]) == max(a[0], b[0])

    @rule(x=st.integers(-(2**40), 2**40), high=st.integers(0, 2**32 - 1))
    def java_int(self, x: int, high: int) -> None:
        for v in (x, high, high | 1 << 31):
            got = int32(v)
            assert got == _java_int(v), f"int32({v}) = {got}, Java says {_java_int(v)}"


class _JavaHashMap:
    """Java's HashMap (default capacity 16, load factor 0.75) for distinct Integer keys,
    put one by one. `treeified` is set when a bucket would reach 9 keys, where Java turns
    it into a tree or resizes early: outside what hash_order states."""

    def __init__(self) -> None:
        self.table: list[list[int]] = [[] for _ in range(16)]
        self.size = 0
        self.treeified = False

    @staticmethod
    def spread(key: int) -> int:
        h = key & 0xFFFFFFFF  # Integer.hashCode, as an unsigned 32-bit pattern
        return h ^ (h >> 16)

    def put(self, key: int) -> None:
        bucket = self.table[self.spread(key) & (len(self.table) - 1)]
        bucket.append(key)
        if len(bucket) > 8:
            self.treeified = True
        self.size += 1
        if self.size > len(self.table) * 3 // 4:  # the threshold: (int) (capacity * 0.75)
            self.resize()

    def resize(self) -> None:
        old = len(self.table)
        table: list[list[int]] = [[] for _ in range(2 * old)]
        for j, bucket in enumerate(self.table):
            for key in bucket:  # each half keeps the bucket's order
                table[j + old if self.spread(key) & old else j].append(key)
        self.table = table

    def iteration(self) -> list[int]:
        return [key for bucket in self.table for key in bucket]


class HashOrderMachine(RuleBasedStateMachine):
    @rule(
        keys=st.lists(
            st.one_of(st.integers(0, 70), st.integers(-(2**31), 2**31 - 1)),
            max_size=60,
            unique=True,
        )
    )
    def iterated(self, keys: list[int]) -> None:
        java = _JavaHashMap()
        for k in keys:
            java.put(k)
        if java.treeified:
            return
        got = hash_order(keys, lambda k: k)
        assert got == java.iteration(), (
            f"hash_order({keys}) = {got}, Java iterates {java.iteration()}"
        )


MACHINES: tuple[type[RuleBasedStateMachine], ...] = (
    LogMetadataMachine,
    CommitRuleMachine,
    QuorumMathMachine,
    HashOrderMachine,
)


def derandomized(examples: int, steps: int) -> settings:
    """Hypothesis settings for a campaign: the same examples every time, no deadline, no
    database, no shrinking (a kill is all that is asked)."""
    from hypothesis import HealthCheck, Phase

    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        derandomize=True,
        database=None,
        deadline=None,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )


def run_all(examples: int, steps: int) -> None:
    """Every machine of MACHINES, derandomized (raises on the first disagreement)."""
    from hypothesis.stateful import run_state_machine_as_test

    search = derandomized(examples, steps)
    for machine in MACHINES:
        run_state_machine_as_test(machine, settings=search)
