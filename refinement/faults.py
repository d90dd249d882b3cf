"""Fault profiles of the simulator: what the network and the nodes may do wrong, and how often.

A profile is plain data; the simulator draws every fault from its one seeded generator. Rates
are per virtual second (a Poisson process each), durations are uniform in [low, high] ms.

KIP-630: every base profile has a `NAME+snapshots` variant (`with_snapshots`) in which the
replicas take snapshots, leaders move their log start past replicas that fell behind, and those
catch up by FetchSnapshot in small chunks, under the base profile's faults; where the base
profile has node faults, a node may also crash at each step of a transfer (after a chunk is
written, between validation and install, right after install), and where it has message faults,
a chunk may arrive corrupted. `disk-loss` adds observers that lose their whole data directory.
A base profile itself draws nothing for snapshots: its traces are those it always had.

KIP-853/856: every base profile also has a `NAME+reconfig` variant (`with_reconfig`): the
cluster is bootstrapped as a dynamic quorum (kraft.version 1, a bootstrap Voters record),
spare replicas start as observers, and an operator (refinement.sim_reconfig) adds and removes
voters (the leader too) under the base profile's faults; where the base profile has node
faults, a leader may crash right after appending a change, and a voter may lose its disk and
come back with a new directory id. Its clients include two idempotent producers
(`producers`), whose resends must be answered with the offsets of the original batch.

Late and failed answers: `NAME+delays` (`with_delays`) holds answers until about when their
request times out (just before or just after), or past an election or fetch timeout, fails
requests sent over a cut link back to their sender, and runs two observers, so that the
timing checkers (refinement.invariants_timing) see the retry rules around every timer edge;
with snapshots, the driver's validation of a fetched snapshot now and then outlasts the fetch
timeout, whose timer must stay suspended meanwhile. They also hold Vote (real and pre-vote),
BeginQuorumEpoch and EndQuorumEpoch answers until their requester has moved to another state
or epoch (`hold_past_election`): a grant to a Candidate whose election timer fired reaches the
Prospective it became, which must not count it (CandidateByPreVotes). Held only until a
timer edge counted from the request, a real vote's answer seldom came in the few milliseconds
between the candidate's randomized timer firing and its Prospective's pre-vote round trip:
2 such grants in seeds 100-159 of mixed+snapshots+delays (2000 events), 36 with this fault.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class FaultProfile:
    name: str
    # Per message: dropped with probability `loss`, delivered twice with `duplicate`.
    loss: float = 0.0
    duplicate: float = 0.0
    # Extra uniform delay in [0, jitter_ms] on top of the base delay: messages overtake each
    # other, which is how the simulator reorders.
    jitter_ms: int = 0
    # Partitions: a symmetric one splits the nodes in two groups; a one-way one blocks the
    # link a -> b only. Each heals after a duration in `partition_ms`.
    partition_rate: float = 0.0
    one_way_fraction: float = 0.5
    partition_ms: tuple[int, int] = (300, 3000)
    # Crashes lose what the log did not flush; the node restarts after `down_ms`.
    crash_rate: float = 0.0
    # Graceful shutdowns (a Shutdown event, then stop on ShutdownComplete); restart likewise.
    shutdown_rate: float = 0.0
    down_ms: tuple[int, int] = (200, 3000)
    # How many voters may be down at once; None: a minority, so the cluster can make progress.
    # Safety must hold either way; more lets whole-cluster outages test durability.
    max_down: int | None = None
    # KIP-630: a random running replica asks CreateSnapshot at its HWM at this rate (0: the
    # replicas keep no snapshots at all, as before), and the leaders' log start may move past
    # a replica that has not fetched for `start_offset_lag_ms`
    # (metadata.start.offset.lag.time.max.ms; None: QuorumTiming's).
    snapshot_rate: float = 0.0
    start_offset_lag_ms: int | None = None
    # Fetch and FetchSnapshot answers carry at most this many bytes (None: QuorumTiming's), so
    # a snapshot moves in several chunks, each of which may be lost, duplicated or reordered.
    fetch_max_bytes: int | None = None
    # The simulated state machine's snapshots carry this many filler bytes besides the history
    # they hold, so that a snapshot moves in several chunks while Fetch still carries many
    # batches at once.
    snapshot_padding: int = 0
    # Per FetchSnapshotResponse carrying a chunk: one byte of it flipped (within what the batch
    # CRC or the epoch check covers), so that validating before installing matters.
    corrupt: float = 0.0
    # Per step of a snapshot transfer performed by a node (a chunk written, the snapshot
    # validated, the snapshot installed): the node crashes right after it, before its next
    # event (for validation: before the driver's answer comes back).
    transfer_crash: float = 0.0
    # Disk loss: at this rate a random running observer crashes and loses its whole data
    # directory (log, snapshots, quorum-state), restarts empty and must catch up, by
    # FetchSnapshot once the leader's log start has moved. Observers only: a voter that loses
    # its disk may vote twice in one epoch (KIP-853's directory ids prevent it: issue #15).
    disk_loss_rate: float = 0.0
    # At least this many observers run under this profile (added to the configuration's).
    observers: int = 0
    # A request to a node that is down fails as a real node's does when the connection is
    # refused: SendFailed(broken=True), so that a follower of a crashed leader stands early
    # (kraft.core.follower). False: a plain SendFailed, as before.
    notice_breaks: bool = False
    # KIP-853 (the `+reconfig` profiles): a dynamic quorum, and an operator sending
    # AddRaftVoter/RemoveRaftVoter at this rate (0: the static voter set, as before).
    reconfig_rate: float = 0.0
    # At this rate a random running voter crashes and loses its data directory; it restarts
    # with a new directory id, an observer until the operator adds it back (dynamic only).
    voter_disk_loss_rate: float = 0.0
    # Per Voters record a leader appends for a change: it crashes right after, before its
    # next event (the record not yet flushed nor replicated: a crash mid-change).
    change_crash: float = 0.0
    # Idempotent producers (refinement.sim_clients) sharing the client appends, each with one
    # batch in flight that it resends with the same producer id and sequence (0: the plain
    # client alone, as before). Only without snapshots: a replica rebuilds its producer table
    # from its log (kraft.core.producers), which a snapshot cuts.
    producers: int = 0
    # The adversary (the `+adversary` profiles, refinement.sim_adversary): at this rate a
    # forged request or response reaches a running replica (0: none, as before), and per
    # Fetch answer carrying records, one byte its batch CRC covers is flipped on the wire.
    adversary_rate: float = 0.0
    corrupt_fetch: float = 0.0
    # KIP-853: at this rate the operator also sends a one-shot request whose
    # answer it knows in advance: UpdateRaftVoter (valid, or without the default listener,
    # with max < min kraft.version, an unknown voter, a stale epoch, another cluster's id)
    # and malformed AddRaftVoter / RemoveRaftVoter (refinement.sim_reconfig); on a static
    # quorum too (kraft.version 0, whose voters Kafka 4 sends UpdateRaftVoter). 0: none.
    update_voter_rate: float = 0.0
    # Delayed answers (the `+delays` profiles): per answer to a request, the probability that
    # the network holds it until near a timer boundary of the requester, counted from when
    # the request left: its request timeout (quorum.request.timeout.ms), an election timeout
    # or a fetch timeout, give or take a retry backoff. The requester may already have sent
    # the request again, given up on it or stood for election when the answer comes. The
    # fault phase only: healing stops it (refinement.sim_liveness).
    hold_answer: float = 0.0
    # A request sent over a link a partition cuts fails back to its sender after a round trip
    # (SendFailed, not broken: a connection that cannot be set up) instead of vanishing, so
    # that the failed-send paths run while the peer is alive. False: it is dropped, as before.
    refuse_cut: bool = False
    # Slow validation (the `+delays` profile with snapshots): per ValidateSnapshot, with this
    # probability the driver answers (SnapshotValidated) only after a delay drawn in
    # `validate_ms`, as a node validating a large snapshot on a worker thread does, at times
    # past the fetch timeout; an answer about a `.part` started afresh or discarded meanwhile
    # is dropped, as the node's store drops it (kraft.server.snapshot_store.validate_later).
    slow_validation: float = 0.0
    validate_ms: tuple[int, int] = (0, 0)
    # Per FetchSnapshotResponse carrying a chunk: the answer comes mangled so that it cannot
    # belong to the snapshot (no bytes, or a size the chunk ends past), as a broken or
    # confused leader might send: the fetcher starts over from Fetch after the retry backoff
    # (kraft.core.snapshot_transfer; FetchRetryExact). Drawn from its own generator.
    mangle_chunk: float = 0.0
    # Per Fetch answer carrying more than one batch: its records cut at a random byte past the
    # first batch, as a Kafka leader cuts its answer at the Fetch's max bytes (it reads that
    # many bytes of its log, always one whole batch): the fetcher appends the whole batches
    # before the cut and fetches on from there. Drawn from its own generator.
    cut_fetch: float = 0.0
    # Answers held past the requester's election timeout (the `+delays` profiles): per
    # answer to a Vote (real or pre-vote), BeginQuorumEpoch or EndQuorumEpoch request, with
    # this probability the network holds it until the requester has moved to another state or
    # epoch (its election timer fired, it won, lost or stepped down), or for at most two
    # election timeouts (past any randomized one); it then arrives within one message delay,
    # before the answers to what the requester sent on its move. The fault phase only.
    hold_past_election: float = 0.0
    # The quorum's size under this profile, in place of the configuration's (None: its own):
    # `solo` runs a single voter, whose restarts must lead at once (Kafka's initialize).
    voters: int | None = None
    # quorum.request.timeout.ms under this profile (None: QuorumTiming's, 2000 ms, above any
    # election timer): `mixed+quick` sets it below the election timeout, so that a request
    # unanswered is sent again within one election round (Vote among them).
    request_timeout_ms: int | None = None

    @property
    def snapshots(self) -> bool:
        return self.snapshot_rate > 0

    @property
    def dynamic(self) -> bool:
        """A dynamic quorum (kraft.version 1) whose voter set an operator changes."""
        return self.reconfig_rate > 0

    @property
    def has_node_faults(self) -> bool:
        return self.crash_rate > 0 or self.shutdown_rate > 0


NONE = FaultProfile("none")
LOSSY = FaultProfile("lossy", loss=0.1, duplicate=0.05, jitter_ms=40)
PARTITIONS = FaultProfile("partitions", partition_rate=1.0, jitter_ms=5)
CRASHES = FaultProfile("crashes", crash_rate=1.0, max_down=99)
SHUTDOWNS = FaultProfile("shutdowns", shutdown_rate=0.7)
MIXED = FaultProfile(
    "mixed",
    loss=0.05,
    duplicate=0.03,
    jitter_ms=20,
    partition_rate=0.5,
    crash_rate=0.5,
    shutdown_rate=0.25,
)
# Snapshots taken often, with crashes, partitions and lossy links, so that leaders move their
# log start past replicas that fell behind and those catch up by FetchSnapshot.
SNAPSHOTS = FaultProfile(
    "snapshots",
    loss=0.03,
    duplicate=0.03,
    jitter_ms=10,
    partition_rate=0.6,
    crash_rate=0.6,
    snapshot_rate=4.0,
    start_offset_lag_ms=1000,
    fetch_max_bytes=160,
)


def with_snapshots(base: FaultProfile) -> FaultProfile:
    """`base` with snapshots taken often and moved in small chunks: `NAME+snapshots`. Chunks
    may be corrupted where `base` loses messages, nodes crash mid-transfer where it has node
    faults."""
    return replace(
        base,
        name=f"{base.name}+snapshots",
        snapshot_rate=4.0,
        start_offset_lag_ms=1000,
        fetch_max_bytes=1024,
        snapshot_padding=3000,
        corrupt=0.02 if base.loss > 0 else 0.0,
        transfer_crash=0.05 if base.has_node_faults else 0.0,
    )


# Observers that lose their disk now and then, with snapshots, crashes and lossy links: an
# emptied observer fetches the leader's snapshot (the log it needs is gone) and then the log.
DISK_LOSS = replace(
    with_snapshots(
        FaultProfile(
            "disk-loss",
            loss=0.03,
            duplicate=0.03,
            jitter_ms=10,
            partition_rate=0.3,
            crash_rate=0.3,
        )
    ),
    name="disk-loss",
    disk_loss_rate=0.6,
    observers=2,
)


def with_reconfig(base: FaultProfile) -> FaultProfile:
    """`base` on a dynamic quorum whose voters an operator changes: `NAME+reconfig`. Two
    spare observers run; where `base` has node faults, voters also lose their disk."""
    return replace(
        base,
        name=f"{base.name}+reconfig",
        reconfig_rate=3.0,
        observers=max(base.observers, 2),
        voter_disk_loss_rate=0.15 if base.has_node_faults else 0.0,
        change_crash=0.25 if base.has_node_faults else 0.0,
        producers=0 if base.snapshots else 2,
    )


def with_adversary(base: FaultProfile) -> FaultProfile:
    """`base` with an adversary on the network: `NAME+adversary`. Forged messages (malformed,
    out of bounds, from another cluster, of a future or past epoch, claiming another replica
    or the receiver itself, from an unknown node, a Fetch past the log end) reach running
    replicas about ten times a virtual second, and a Fetch answer's records are corrupted
    now and then."""
    return replace(base, name=f"{base.name}+adversary", adversary_rate=10.0, corrupt_fetch=0.02)


def with_delays(base: FaultProfile) -> FaultProfile:
    """`base` with late and failed answers: `NAME+delays`. Answers are held until about
    when their request times out, or past an election or fetch timeout (`hold_answer`), and
    where `base` partitions, a request over a cut link fails back to its sender
    (`refuse_cut`); a request to a node that is down fails as a refused connection does
    (`notice_breaks`: a follower's fetch timer runs out early, and never later than it
    would have, refinement.invariants_timing). Two observers run, so that the answers to
    Fetches looking for the leader are held too. With snapshots, the driver's validation of a
    fetched snapshot is slow now and then (`slow_validation`). Vote, BeginQuorumEpoch and
    EndQuorumEpoch answers are now and then held until their requester has moved on
    (`hold_past_election`): a late grant reaches a Prospective or a new Candidate."""
    return replace(
        base,
        name=f"{base.name}+delays",
        hold_answer=0.15,
        refuse_cut=True,
        notice_breaks=True,
        observers=max(base.observers, 2),
        slow_validation=0.5 if base.snapshots else 0.0,
        validate_ms=(2600, 6000) if base.snapshots else (0, 0),
        hold_past_election=0.2,
    )


BASE_PROFILES = (NONE, LOSSY, PARTITIONS, CRASHES, SHUTDOWNS, MIXED)
PROFILES: dict[str, FaultProfile] = {
    p.name: p
    for p in (
        *BASE_PROFILES,
        SNAPSHOTS,
        *(with_snapshots(b) for b in BASE_PROFILES),
        DISK_LOSS,
        *(with_reconfig(b) for b in BASE_PROFILES),
        with_adversary(MIXED),
        with_delays(MIXED),
        with_delays(CRASHES),
        with_delays(with_snapshots(MIXED)),
    )
}
# Snapshots and voter changes together, with UpdateRaftVoter and malformed voter changes: a
# snapshot must carry the voter set in force at its end (KIP-853), and a replica that installs
# one takes its voter set from it. Not trace-validated (KRaft.tla has no UpdateRaftVoter).
MIXED_SNAPSHOTS_RECONFIG = replace(with_reconfig(with_snapshots(MIXED)), update_voter_rate=8.0)
PROFILES[MIXED_SNAPSHOTS_RECONFIG.name] = MIXED_SNAPSHOTS_RECONFIG
# The adversary's profile also gets the one-shots on its static quorum (kraft.version 0): an
# UpdateRaftVoter reaches leaders, followers, candidates and resigned leaders, answered as a
# Kafka 4 static leader answers it (refinement.invariants_voter_changes).
PROFILES["mixed+adversary"] = replace(PROFILES["mixed+adversary"], update_voter_rate=8.0)
# The adversary where logs start at snapshots: among its forgeries, a Fetch at a leader's
# log start in an epoch it draws, whose answer (the latest snapshot's id unless the epoch is
# the earliest snapshot's: Kafka's validateOffsetAndEpoch) FetchAnswerPosition judges.
# Also Fetch answers cut inside a batch as a Kafka leader cuts them (`cut_fetch`): not a
# forgery, but no step of the spec either (the fetcher appends fewer batches than the answer's
# message holds), so only where traces are not validated.
# And FetchSnapshot answers that cannot belong to the snapshot (`mangle_chunk`, with sizes of
# 0, -1 or a different one among them), which ChunkAnswerTakenExactly judges.
MIXED_SNAPSHOTS_ADVERSARY = replace(
    with_adversary(with_snapshots(MIXED)), cut_fetch=0.3, mangle_chunk=0.2
)
PROFILES[MIXED_SNAPSHOTS_ADVERSARY.name] = MIXED_SNAPSHOTS_ADVERSARY
# The profiles that take snapshots (each run by the snapshot sweeps).
SNAPSHOT_PROFILES: tuple[str, ...] = tuple(n for n, p in PROFILES.items() if p.snapshots)
# The profiles with an adversary on the network (or cut Fetch answers): no trace of theirs is
# validated.
ADVERSARY_PROFILES: tuple[str, ...] = tuple(
    n for n, p in PROFILES.items() if p.adversary_rate > 0 or p.corrupt_fetch > 0 or p.cut_fetch > 0
)
# The profiles whose voter set changes (each run by the reconfiguration sweeps).
RECONFIG_PROFILES: tuple[str, ...] = tuple(n for n, p in PROFILES.items() if p.dynamic)
# Mangled FetchSnapshot chunks (`mangle_chunk`) where answers are held: the retry timing
# after an answer that cannot belong to the snapshot.
PROFILES["mixed+snapshots+delays"] = replace(PROFILES["mixed+snapshots+delays"], mangle_chunk=0.02)
# A single-voter quorum with two observers under mixed faults, the voter itself crashing and
# shutting down too (max_down 1): Kafka's only voter leads as it starts and commits what it
# writes at once (refinement.invariants_only_voter), the observers fetch from it.
SOLO = replace(MIXED, name="solo", voters=1, observers=2, max_down=1)
PROFILES[SOLO.name] = SOLO
# Mixed faults with quorum.request.timeout.ms 700, below the election timeout (1000) and above
# the fetch max wait (500): a Prospective or Candidate asks an unanswered voter again before its
# election timer runs out, and must never ask again one whose answer it counted.
MIXED_QUICK = replace(MIXED, name="mixed+quick", request_timeout_ms=700)
PROFILES[MIXED_QUICK.name] = MIXED_QUICK
# A single-voter quorum grown and shrunk by the operator (`kraft format --standalone`, then
# AddRaftVoter) over a lossy network: its leader's voter set grows from one voter, which starts
# its check-quorum timer (Kafka runs none for a single voter; invariants_timing's
# CheckQuorumNotEarly). No node faults: on `solo`'s, VoterAddedWithProbedVersions fired
# (seeds 131 and 159 of 100..159, not yet explained).
SOLO_RECONFIG = with_reconfig(replace(LOSSY, name="solo+lossy", voters=1, observers=2))
PROFILES[SOLO_RECONFIG.name] = SOLO_RECONFIG
RECONFIG_PROFILES = (*RECONFIG_PROFILES, SOLO_RECONFIG.name)
