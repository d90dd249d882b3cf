--------------------------- MODULE KRaftSnapshot ---------------------------
(***************************************************************************)
(* KRaft with snapshots (KIP-630) on top of a simplified KIP-595 core.     *)
(*                                                                         *)
(* Offsets: a log "end offset" o means the records at positions 1..o exist *)
(* (Kafka's 0-based offsets 0..o-1). A snapshot with end offset o holds    *)
(* records 1..o; the log start offset is the number of records no longer   *)
(* in the log, and it always equals the end offset of a snapshot held by   *)
(* the replica (or 0). EffLog(s) is the snapshot at the log start followed *)
(* by the log: the replica's whole history as far as it knows it.          *)
(*                                                                         *)
(* Simplifications (standalone module, same vocabulary as KRaft.tla):      *)
(*  - the network is a set of messages: reordering and loss (DropMessage), *)
(*    no duplication; a follower has at most one Fetch or FetchSnapshot in *)
(*    flight, as a Kafka follower does;                                    *)
(*  - Crash and Restart are one step (Restart): the time a replica is down *)
(*    is indistinguishable from message delay;                             *)
(*  - the HWM is kept across Restart (it is what the state machine applied)*)
(*  - a snapshot is NumChunks abstract chunks; the follower accumulates    *)
(*    positions and installs it when the last chunk arrives;               *)
(*  - all replicas are voters (voter changes are in KRaftReconfig.tla).    *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    Server,        \* replica ids
    Nil,           \* a model value
    MaxEpoch,      \* no election beyond this epoch
    MaxOffset,     \* no append beyond this end offset
    NumChunks,     \* chunks per snapshot transfer
    Faults,        \* TRUE: DropMessage and Restart are enabled
    MsgLimit,      \* state constraint: messages in flight
    Mutant         \* "none" in normal models; see the mutant configs

ASSUME NumChunks \in Nat \ {0} /\ MaxEpoch \in Nat /\ MaxOffset \in Nat
ASSUME Faults \in BOOLEAN

VARIABLES
    currentEpoch,  \* persisted
    votedFor,      \* persisted
    leader,        \* persisted (quorum-state LeaderId)
    state,
    log,           \* persisted: records after the log start offset
    logStart,      \* persisted
    snapshots,     \* persisted: set of [end, epoch, content]
    hwm,
    votesGranted,
    endOffsetOf,   \* leader's view of each follower's fetch offset
    fetching,      \* Nil or [id |-> [end, epoch], pos |-> chunks received]
    messages,
    committed      \* ghost: [index, record, epoch] committed by a leader in epoch

vars == <<currentEpoch, votedFor, leader, state, log, logStart, snapshots, hwm,
          votesGranted, endOffsetOf, fetching, messages, committed>>

States == {"Unattached", "Voted", "Candidate", "Leader", "Follower", "Resigned"}
Kinds == {"LeaderChange", "Data"}
Epochs == 0..MaxEpoch
Offsets == 0..MaxOffset
Quorum(S) == Cardinality(S) * 2 > Cardinality(Server)
Max(S) == CHOOSE x \in S : \A y \in S : y <= x
Min(a, b) == IF a < b THEN a ELSE b
MaxOf(a, b) == IF a > b THEN a ELSE b

----------------------------------------------------------------------------
(* Log helpers *)

SnapAt(s, o) == CHOOSE x \in snapshots[s] : x.end = o
BaseContent(s) == IF logStart[s] = 0 THEN <<>> ELSE SnapAt(s, logStart[s]).content
EffLog(s) == BaseContent(s) \o log[s]
LEO(s) == logStart[s] + Len(log[s])
EpochAt(s, i) == IF i = 0 THEN 0 ELSE EffLog(s)[i].epoch
LastEpoch(s) == EpochAt(s, LEO(s))  \* the latest snapshot or log (KIP-630)
LatestSnapshot(s) == CHOOSE x \in snapshots[s] : \A y \in snapshots[s] : y.end <= x.end
Prefix(seq, n) == SubSeq(seq, 1, n)
DropPrefix(s, o) == SubSeq(log[s], o - logStart[s] + 1, Len(log[s]))

\* Largest offset in [logStart, LEO] whose epoch is <= e (KIP-595's end offset for an
\* epoch); -1 when even the log start is newer than e.
EndOffsetForEpoch(s, e) ==
    LET os == {i \in logStart[s]..LEO(s) : EpochAt(s, i) <= e}
    IN IF os = {} THEN -1 ELSE Max(os)

UpToDate(lastEpoch, lastOffset, s) ==
    \/ lastEpoch > LastEpoch(s)
    \/ lastEpoch = LastEpoch(s) /\ lastOffset >= LEO(s)

Send(m) == messages' = messages \cup {m}
Reply(req, resp) == messages' = (messages \ {req}) \cup {resp}
Discard(m) == messages' = messages \ {m}

----------------------------------------------------------------------------
Init ==
    /\ currentEpoch = [s \in Server |-> 0]
    /\ votedFor = [s \in Server |-> Nil]
    /\ leader = [s \in Server |-> Nil]
    /\ state = [s \in Server |-> "Unattached"]
    /\ log = [s \in Server |-> <<>>]
    /\ logStart = [s \in Server |-> 0]
    /\ snapshots = [s \in Server |-> {}]
    /\ hwm = [s \in Server |-> 0]
    /\ votesGranted = [s \in Server |-> {}]
    /\ endOffsetOf = [s \in Server |-> [t \in Server |-> 0]]
    /\ fetching = [s \in Server |-> Nil]
    /\ messages = {}
    /\ committed = {}

\* Move to a higher epoch without a leader or vote (seen in a request or response).
BumpEpoch(s, e) ==
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = e]
    /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    /\ state' = [state EXCEPT ![s] = "Unattached"]
    /\ fetching' = [fetching EXCEPT ![s] = Nil]

----------------------------------------------------------------------------
(* Election *)

ElectionTimeout(s) ==
    /\ state[s] \in {"Unattached", "Voted", "Follower", "Candidate", "Resigned"}
    /\ currentEpoch[s] < MaxEpoch
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = @ + 1]
    /\ state' = [state EXCEPT ![s] = "Candidate"]
    /\ votedFor' = [votedFor EXCEPT ![s] = s]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    /\ votesGranted' = [votesGranted EXCEPT ![s] = {s}]
    /\ fetching' = [fetching EXCEPT ![s] = Nil]
    /\ messages' = messages \cup
         {[type |-> "VoteRequest", from |-> s, to |-> t, epoch |-> currentEpoch[s] + 1,
           lastEpoch |-> LastEpoch(s), lastOffset |-> LEO(s)] : t \in Server \ {s}}
    /\ UNCHANGED <<log, logStart, snapshots, hwm, endOffsetOf, committed>>

HandleVoteRequest(m) ==
    LET s == m.to
        newer == m.epoch > currentEpoch[s]
        epochNow == IF newer THEN m.epoch ELSE currentEpoch[s]
        vote == IF newer THEN Nil ELSE votedFor[s]
        grant == /\ m.epoch = epochNow
                 /\ vote \in {Nil, m.from}
                 /\ ~newer => state[s] \in {"Unattached", "Voted"}
                 /\ UpToDate(m.lastEpoch, m.lastOffset, s)
    IN
    /\ m.type = "VoteRequest"
    /\ IF newer \/ grant
         THEN /\ currentEpoch' = [currentEpoch EXCEPT ![s] = epochNow]
              /\ votedFor' = [votedFor EXCEPT ![s] = IF grant THEN m.from ELSE Nil]
              /\ leader' = [leader EXCEPT ![s] = Nil]
              /\ state' = [state EXCEPT ![s] = IF grant THEN "Voted" ELSE "Unattached"]
              /\ fetching' = [fetching EXCEPT ![s] = Nil]
         ELSE UNCHANGED <<currentEpoch, votedFor, leader, state, fetching>>
    \* a same-epoch rejection tells the candidate nothing: it is not sent (as if lost)
    /\ IF grant \/ epochNow > m.epoch
         THEN Reply(m, [type |-> "VoteResponse", from |-> s, to |-> m.from, epoch |-> epochNow,
                 granted |-> grant])
         ELSE Discard(m)
    /\ UNCHANGED <<log, logStart, snapshots, hwm, votesGranted, endOffsetOf, committed>>

HandleVoteResponse(m) ==
    LET s == m.to IN
    /\ m.type = "VoteResponse"
    /\ IF m.epoch > currentEpoch[s]
         THEN /\ BumpEpoch(s, m.epoch)
              /\ UNCHANGED votesGranted
         ELSE /\ votesGranted' = IF state[s] = "Candidate" /\ m.epoch = currentEpoch[s]
                                      /\ m.granted
                                   THEN [votesGranted EXCEPT ![s] = @ \cup {m.from}]
                                   ELSE votesGranted
              /\ UNCHANGED <<currentEpoch, votedFor, leader, state, fetching>>
    /\ Discard(m)
    /\ UNCHANGED <<log, logStart, snapshots, hwm, endOffsetOf, committed>>

\* The new leader appends the LeaderChange control record that starts its epoch.
BecomeLeader(s) ==
    /\ state[s] = "Candidate"
    /\ Quorum(votesGranted[s])
    /\ LEO(s) < MaxOffset
    /\ state' = [state EXCEPT ![s] = "Leader"]
    /\ leader' = [leader EXCEPT ![s] = s]
    /\ log' = [log EXCEPT ![s] = Append(@, [epoch |-> currentEpoch[s], kind |-> "LeaderChange"])]
    /\ endOffsetOf' = [endOffsetOf EXCEPT ![s] = [t \in Server |-> 0]]
    /\ messages' = messages \cup
         {[type |-> "BeginQuorumEpoch", from |-> s, to |-> t, epoch |-> currentEpoch[s]]
            : t \in Server \ {s}}
    /\ UNCHANGED <<currentEpoch, votedFor, logStart, snapshots, hwm, votesGranted,
                   fetching, committed>>

HandleBeginQuorumEpochRequest(m) ==
    LET s == m.to IN
    /\ m.type = "BeginQuorumEpoch"
    /\ IF \/ m.epoch > currentEpoch[s]
          \/ m.epoch = currentEpoch[s] /\ state[s] \in {"Unattached", "Voted", "Candidate"}
         THEN /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
              /\ votedFor' = [votedFor EXCEPT ![s] = IF m.epoch > currentEpoch[s] THEN Nil ELSE @]
              /\ leader' = [leader EXCEPT ![s] = m.from]
              /\ state' = [state EXCEPT ![s] = "Follower"]
              /\ fetching' = [fetching EXCEPT ![s] = Nil]
         ELSE UNCHANGED <<currentEpoch, votedFor, leader, state, fetching>>
    /\ Discard(m)
    /\ UNCHANGED <<log, logStart, snapshots, hwm, votesGranted, endOffsetOf, committed>>

\* A leader steps down; modelled without EndQuorumEpoch (followers time out). Not in Next:
\* Restart already takes a leader to Resigned, and the models are smaller without it.
Resign(s) ==
    /\ state[s] = "Leader"
    /\ state' = [state EXCEPT ![s] = "Resigned"]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, log, logStart, snapshots, hwm,
                   votesGranted, endOffsetOf, fetching, messages, committed>>

----------------------------------------------------------------------------
(* Replication *)

ClientAppend(s) ==
    /\ state[s] = "Leader"
    /\ LEO(s) < MaxOffset
    /\ log' = [log EXCEPT ![s] = Append(@, [epoch |-> currentEpoch[s], kind |-> "Data"])]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, logStart, snapshots, hwm,
                   votesGranted, endOffsetOf, fetching, messages, committed>>

InFlight(s) ==
    \E m \in messages :
        \/ m.type \in {"FetchRequest", "FetchSnapshotRequest"} /\ m.from = s
        \/ m.type \in {"FetchResponse", "FetchSnapshotResponse"} /\ m.to = s

SendFetchRequest(s) ==
    /\ state[s] = "Follower"
    /\ fetching[s] = Nil
    /\ ~InFlight(s)
    /\ Send([type |-> "FetchRequest", from |-> s, to |-> leader[s], epoch |-> currentEpoch[s],
             hwm |-> hwm[s], fetchOffset |-> LEO(s), lastFetchedEpoch |-> LastEpoch(s)])
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, logStart, snapshots, hwm,
                   votesGranted, endOffsetOf, fetching, committed>>

FetchResp(m, l, result, entries, divOffset, snapId) ==
    [type |-> "FetchResponse", from |-> l, to |-> m.from, epoch |-> currentEpoch[l],
     leader |-> leader[l], result |-> result, fetchOffset |-> m.fetchOffset,
     entries |-> entries, hwm |-> hwm[l], divEpoch |-> IF divOffset < 0 THEN 0
                                                      ELSE EpochAt(l, divOffset),
     divOffset |-> divOffset, snapshotId |-> snapId, logStart |-> logStart[l]]

NoSnap == [end |-> 0, epoch |-> 0]
IdOf(x) == [end |-> x.end, epoch |-> x.epoch]

\* KIP-595 fetch validation extended by KIP-630: a fetch below the log start (or one
\* whose epoch is older than everything left in the log) is answered with the id of the
\* latest snapshot; a fetch that diverges gets the diverging epoch and end offset.
HandleFetchRequest(m) ==
    LET l == m.to
        fo == m.fetchOffset
        fe == m.lastFetchedEpoch
        valid == fo >= logStart[l] /\ fo <= LEO(l) /\ EpochAt(l, fo) = fe
        div == EndOffsetForEpoch(l, fe)
        toSnapshot == fo < logStart[l] \/ (~valid /\ div < 0)
    IN
    /\ m.type = "FetchRequest"
    \* long poll: a caught-up fetch waits at the leader until there is something new
    /\ ~(state[l] = "Leader" /\ m.epoch = currentEpoch[l] /\ valid /\ fo = LEO(l)
         /\ endOffsetOf[l][m.from] = fo /\ hwm[l] <= m.hwm)
    /\ IF state[l] = "Leader" /\ m.epoch = currentEpoch[l]
         THEN
         /\ CASE toSnapshot ->
                 /\ Reply(m, FetchResp(m, l, "snapshot", <<>>, -1, IdOf(LatestSnapshot(l))))
                 /\ UNCHANGED endOffsetOf
              [] valid ->
                 /\ Reply(m, FetchResp(m, l, "ok",
                                       IF fo < LEO(l) THEN <<EffLog(l)[fo + 1]>> ELSE <<>>,
                                       -1, NoSnap))
                 /\ endOffsetOf' = [endOffsetOf EXCEPT ![l][m.from] = fo]
              [] OTHER ->
                 /\ Reply(m, FetchResp(m, l, "diverging", <<>>, div, NoSnap))
                 /\ UNCHANGED endOffsetOf
         ELSE \* not the leader of that epoch: a newer epoch is told to the fetcher
         /\ IF currentEpoch[l] > m.epoch
              THEN Reply(m, FetchResp(m, l, "fenced", <<>>, -1, NoSnap))
              ELSE Discard(m)
         /\ UNCHANGED endOffsetOf
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, logStart, snapshots, hwm,
                   votesGranted, fetching, committed>>

\* Truncate s's log to end offset o (never below its log start).
TruncateTo(s, o) ==
    log' = [log EXCEPT ![s] = SubSeq(@, 1, MaxOf(o, logStart[s]) - logStart[s])]

\* KIP-630: a follower's log start is the minimum of the leader's log start and the end of
\* its own largest snapshot (older snapshots are then deleted).
FollowerLogStart(s, leaderLogStart) ==
    LET ends == {x.end : x \in {y \in snapshots[s] : y.end <= leaderLogStart}}
    IN MaxOf(logStart[s], IF ends = {} THEN 0 ELSE Max(ends))

HandleFetchResponse(m) ==
    LET s == m.to
        current == state[s] = "Follower" /\ currentEpoch[s] = m.epoch /\ leader[s] = m.from
                   /\ fetching[s] = Nil /\ LEO(s) = m.fetchOffset
        ls == FollowerLogStart(s, m.logStart)
    IN
    /\ m.type = "FetchResponse"
    /\ CASE current /\ m.result = "ok" ->
              /\ log' = [log EXCEPT ![s] = SubSeq(@ \o m.entries, ls - logStart[s] + 1,
                                                  Len(@) + Len(m.entries))]
              /\ logStart' = [logStart EXCEPT ![s] = ls]
              /\ snapshots' = [snapshots EXCEPT ![s] = {x \in @ : x.end >= ls}]
              /\ hwm' = [hwm EXCEPT ![s] = MaxOf(@, Min(m.hwm, LEO(s) + Len(m.entries)))]
              /\ UNCHANGED <<currentEpoch, votedFor, leader, state, fetching>>
         [] current /\ m.result = "diverging" ->
              /\ TruncateTo(s, Min(m.divOffset, EndOffsetForEpoch(s, m.divEpoch)))
              /\ UNCHANGED <<currentEpoch, votedFor, leader, state, fetching, hwm, logStart,
                             snapshots>>
         [] current /\ m.result = "snapshot" ->
              /\ fetching' = [fetching EXCEPT ![s] = [id |-> m.snapshotId, pos |-> 0]]
              /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, hwm, logStart, snapshots>>
         [] m.result = "fenced" /\ m.epoch > currentEpoch[s] ->
              \* learn the newer epoch and, if known, its leader
              /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
              /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
              /\ leader' = [leader EXCEPT ![s] = m.leader]
              /\ state' = [state EXCEPT ![s] = IF m.leader = Nil THEN "Unattached"
                                                ELSE "Follower"]
              /\ fetching' = [fetching EXCEPT ![s] = Nil]
              /\ UNCHANGED <<log, hwm, logStart, snapshots>>
         [] OTHER -> UNCHANGED <<currentEpoch, votedFor, leader, state, log, hwm, fetching,
                                 logStart, snapshots>>
    /\ Discard(m)
    /\ UNCHANGED <<votesGranted, endOffsetOf, committed>>

\* The leader commits the largest offset of its own epoch held by a majority.
AdvanceHighWatermark(l) ==
    LET agree(n) == {l} \cup {t \in Server \ {l} : endOffsetOf[l][t] >= n}
        ns == {n \in (hwm[l] + 1)..LEO(l) : EpochAt(l, n) = currentEpoch[l] /\ Quorum(agree(n))}
        n == Max(ns)
    IN
    /\ state[l] = "Leader"
    /\ ns # {}
    /\ hwm' = [hwm EXCEPT ![l] = n]
    /\ committed' = committed \cup
         {[index |-> i, record |-> EffLog(l)[i], epoch |-> currentEpoch[l]] :
            i \in {j \in (hwm[l] + 1)..n :
                     ~\E c \in committed : c.index = j /\ c.record = EffLog(l)[j]}}
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, logStart, snapshots,
                   votesGranted, endOffsetOf, fetching, messages>>

----------------------------------------------------------------------------
(* Snapshots (KIP-630) *)

\* A snapshot of the committed prefix, taken at the HWM (the state machine snapshots what it
\* has applied); the mutant snapshots the whole log instead, past the HWM.
CreateSnapshot(s) ==
    LET o == IF Mutant = "SnapshotBeyondHwm" THEN LEO(s) ELSE hwm[s] IN
    /\ o > logStart[s]
    /\ o <= LEO(s)
    /\ \A x \in snapshots[s] : x.end < o
    /\ snapshots' = [snapshots EXCEPT ![s] =
                       @ \cup {[end |-> o, epoch |-> EpochAt(s, o), content |-> Prefix(EffLog(s), o)]}]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, logStart, hwm, votesGranted,
                   endOffsetOf, fetching, messages, committed>>

\* The leader moves its log start up to its latest snapshot and deletes the older snapshots
\* (KIP-630 lets it wait for live replicas first; that only saves snapshot transfers).
\* Followers move theirs on Fetch responses (FollowerLogStart).
AdvanceLogStartOffset(s) ==
    LET snap == LatestSnapshot(s) IN
    /\ state[s] = "Leader"
    /\ snapshots[s] # {}
    /\ snap.end > logStart[s]
    /\ log' = [log EXCEPT ![s] = DropPrefix(s, snap.end)]
    /\ logStart' = [logStart EXCEPT ![s] = snap.end]
    /\ snapshots' = [snapshots EXCEPT ![s] = {snap}]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, hwm, votesGranted, endOffsetOf,
                   fetching, messages, committed>>

SendFetchSnapshotRequest(s) ==
    /\ state[s] = "Follower"
    /\ fetching[s] # Nil
    /\ ~InFlight(s)
    /\ Send([type |-> "FetchSnapshotRequest", from |-> s, to |-> leader[s],
             epoch |-> currentEpoch[s], snapshotId |-> fetching[s].id,
             position |-> fetching[s].pos])
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, logStart, snapshots, hwm,
                   votesGranted, endOffsetOf, fetching, committed>>

HandleFetchSnapshotRequest(m) ==
    LET l == m.to
        have == {x \in snapshots[l] : IdOf(x) = m.snapshotId}
        ok == state[l] = "Leader" /\ m.epoch = currentEpoch[l] /\ have # {}
    IN
    /\ m.type = "FetchSnapshotRequest"
    /\ Reply(m, [type |-> "FetchSnapshotResponse", from |-> l, to |-> m.from,
                 epoch |-> m.epoch, snapshotId |-> m.snapshotId, position |-> m.position,
                 result |-> IF ok THEN "ok" ELSE "error",
                 \* the chunk's bytes, abstractly: the snapshot it belongs to
                 snapshot |-> IF ok THEN CHOOSE x \in have : TRUE
                              ELSE [end |-> 0, epoch |-> 0, content |-> <<>>]])
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, logStart, snapshots, hwm,
                   votesGranted, endOffsetOf, fetching, committed>>

\* Install: keep the log after the snapshot if it matches the snapshot id, else
\* replace the log; the log start becomes the snapshot's end offset.
Install(s, snap) ==
    LET keep == snap.end <= LEO(s) /\ snap.end >= logStart[s] /\ EpochAt(s, snap.end) = snap.epoch
    IN
    /\ log' = [log EXCEPT ![s] = IF keep THEN DropPrefix(s, snap.end) ELSE <<>>]
    /\ logStart' = [logStart EXCEPT ![s] = snap.end]
    /\ snapshots' = [snapshots EXCEPT ![s] = {x \in @ : x.end > snap.end} \cup {snap}]
    /\ hwm' = [hwm EXCEPT ![s] = MaxOf(@, snap.end)]

HandleFetchSnapshotResponse(m) ==
    LET s == m.to
        current == state[s] = "Follower" /\ currentEpoch[s] = m.epoch /\ leader[s] = m.from
                   /\ fetching[s] # Nil /\ fetching[s].id = m.snapshotId
                   /\ fetching[s].pos = m.position
    IN
    /\ m.type = "FetchSnapshotResponse"
    /\ CASE current /\ m.result = "ok" /\ m.position + 1 < NumChunks ->
              /\ fetching' = [fetching EXCEPT ![s].pos = @ + 1]
              /\ UNCHANGED <<log, logStart, snapshots, hwm>>
         [] current /\ m.result = "ok" /\ m.position + 1 >= NumChunks ->
              /\ Install(s, m.snapshot)
              /\ fetching' = [fetching EXCEPT ![s] = Nil]
         [] current /\ m.result # "ok" ->  \* the leader no longer has it: go back to Fetch
              /\ fetching' = [fetching EXCEPT ![s] = Nil]
              /\ UNCHANGED <<log, logStart, snapshots, hwm>>
         [] OTHER -> UNCHANGED <<log, logStart, snapshots, hwm, fetching>>
    /\ Discard(m)
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, votesGranted, endOffsetOf, committed>>

----------------------------------------------------------------------------
(* Faults *)

\* Crash and restart as one step: volatile state is lost, the disk is kept.
Restart(s) ==
    /\ Faults
    /\ state' = [state EXCEPT ![s] =
                   CASE leader[s] = s -> "Resigned"
                     [] leader[s] # Nil -> "Follower"
                     [] votedFor[s] # Nil -> "Voted"
                     [] OTHER -> "Unattached"]
    /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
    /\ endOffsetOf' = [endOffsetOf EXCEPT ![s] = [t \in Server |-> 0]]
    /\ fetching' = [fetching EXCEPT ![s] = Nil]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, log, logStart, snapshots, hwm,
                   messages, committed>>

DropMessage(m) ==
    /\ Faults
    /\ Discard(m)
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, logStart, snapshots, hwm,
                   votesGranted, endOffsetOf, fetching, committed>>

----------------------------------------------------------------------------
\* One disjunct per message handler, so that TLC names each step after its handler.
ReceiveHandleVoteRequest == \E m \in messages : HandleVoteRequest(m)
ReceiveHandleVoteResponse == \E m \in messages : HandleVoteResponse(m)
ReceiveHandleBeginQuorumEpochRequest == \E m \in messages : HandleBeginQuorumEpochRequest(m)
ReceiveHandleFetchRequest == \E m \in messages : HandleFetchRequest(m)
ReceiveHandleFetchResponse == \E m \in messages : HandleFetchResponse(m)
ReceiveHandleFetchSnapshotRequest == \E m \in messages : HandleFetchSnapshotRequest(m)
ReceiveHandleFetchSnapshotResponse == \E m \in messages : HandleFetchSnapshotResponse(m)
ReceiveDropMessage == \E m \in messages : DropMessage(m)

Next ==
    \/ \E s \in Server : ElectionTimeout(s)
    \/ \E s \in Server : BecomeLeader(s)
    \/ \E s \in Server : ClientAppend(s)
    \/ \E s \in Server : SendFetchRequest(s)
    \/ \E s \in Server : AdvanceHighWatermark(s)
    \/ \E s \in Server : CreateSnapshot(s)
    \/ \E s \in Server : AdvanceLogStartOffset(s)
    \/ \E s \in Server : SendFetchSnapshotRequest(s)
    \/ \E s \in Server : Restart(s)
    \/ ReceiveHandleVoteRequest
    \/ ReceiveHandleVoteResponse
    \/ ReceiveHandleBeginQuorumEpochRequest
    \/ ReceiveHandleFetchRequest
    \/ ReceiveHandleFetchResponse
    \/ ReceiveHandleFetchSnapshotRequest
    \/ ReceiveHandleFetchSnapshotResponse
    \/ ReceiveDropMessage

Spec == Init /\ [][Next]_vars

----------------------------------------------------------------------------
(* Invariants *)

Record == [epoch : Epochs, kind : Kinds]

TypeOK ==
    /\ currentEpoch \in [Server -> Epochs]
    /\ votedFor \in [Server -> Server \cup {Nil}]
    /\ leader \in [Server -> Server \cup {Nil}]
    /\ state \in [Server -> States]
    /\ \A s \in Server :
         /\ log[s] \in Seq(Record)
         /\ LEO(s) \in Offsets
         /\ logStart[s] \in Offsets
         /\ hwm[s] \in Offsets
         /\ state[s] = "Leader" => hwm[s] <= LEO(s)
         /\ votesGranted[s] \subseteq Server
         /\ \A x \in snapshots[s] : x.end \in 1..MaxOffset /\ x.epoch \in Epochs
                                    /\ Len(x.content) = x.end
         /\ fetching[s] = Nil \/ fetching[s].pos \in 0..(NumChunks - 1)
    /\ endOffsetOf \in [Server -> [Server -> Offsets]]

\* The log start is 0 or the end offset of a snapshot the replica holds.
LogStartAtSnapshot ==
    \A s \in Server : logStart[s] = 0 \/ \E x \in snapshots[s] : x.end = logStart[s]

ElectionSafety ==
    \A s, t \in Server :
        (s # t /\ state[s] = "Leader" /\ state[t] = "Leader") => currentEpoch[s] # currentEpoch[t]

\* Over whole histories (snapshot content then log): same epoch at an offset => same prefix.
LogMatching ==
    \A s, t \in Server :
        \A i \in 1..Min(LEO(s), LEO(t)) :
            EpochAt(s, i) = EpochAt(t, i) => Prefix(EffLog(s), i) = Prefix(EffLog(t), i)

Holds(s, c) == c.index <= LEO(s) /\ EffLog(s)[c.index] = c.record

\* Every leader of a later epoch holds every committed record.
LeaderCompleteness ==
    \A c \in committed, s \in Server :
        (state[s] = "Leader" /\ currentEpoch[s] > c.epoch) => Holds(s, c)

\* A committed record is never lost: no other record is committed at its offset, every
\* replica whose HWM covers it holds it, and so does every leader of a later epoch.
CommittedNeverLost ==
    /\ \A c, d \in committed : c.index = d.index => c.record = d.record
    /\ \A c \in committed, s \in Server : hwm[s] >= c.index => Holds(s, c)
    /\ LeaderCompleteness

\* A snapshot's content is the committed prefix up to its end offset, and its id is the
\* (end offset, epoch of the last record) of that committed history.
SnapshotMatchesLog ==
    \A s \in Server : \A x \in snapshots[s] :
        /\ \A i \in 1..x.end : \E c \in committed : c.index = i /\ c.record = x.content[i]
        /\ x.epoch = x.content[x.end].epoch

Invariants ==
    /\ TypeOK /\ LogStartAtSnapshot /\ ElectionSafety /\ LogMatching
    /\ CommittedNeverLost /\ LeaderCompleteness /\ SnapshotMatchesLog

\* Action property: no replica's HWM goes down (it is kept across Restart here).
HighWatermarkMonotonic == [][\A s \in Server : hwm'[s] >= hwm[s]]_vars

\* State constraint for the safety models.
StateConstraint == Cardinality(messages) <= MsgLimit

Symm == Permutations(Server)
=============================================================================
