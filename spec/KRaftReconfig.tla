--------------------------- MODULE KRaftReconfig ---------------------------
(***************************************************************************)
(* KRaft voter changes (KIP-856, with the voter set carried as Apache      *)
(* Kafka ships it, KIP-853) on top of a simplified KIP-595 core.           *)
(*                                                                         *)
(* - A replica is identified by (id, storage uuid): Key(s) = <<s, uuid[s]>>*)
(*   DiskLoss restarts a replica with an empty disk and a new uuid.        *)
(* - The voter set of a replica is the set in the last Voters control      *)
(*   record of its log, else the bootstrap set: a change takes effect when *)
(*   appended and is reverted when truncated.                              *)
(* - AddVoter/RemoveVoter: one change at a time (no uncommitted Voters     *)
(*   record in the leader's log), only once the LeaderChange record of the *)
(*   leader's epoch is committed.                                          *)
(* - A leader that is not in its voter set keeps serving Fetch, does not   *)
(*   count itself for the HWM, and resigns once the change is committed.   *)
(* - Any replica may grant a vote; a vote counts for the candidate only if *)
(*   the responder's (id, uuid) is in the candidate's voter set, and a     *)
(*   request addressed to an old uuid of a replica is rejected (KIP-853's  *)
(*   VoterDirectoryId check).                                              *)
(*                                                                         *)
(* Offsets as in KRaftSnapshot.tla: end offset o = records 1..o exist.     *)
(* Simplifications: a set of messages (loss and reordering, no            *)
(* duplication); Crash+Restart is one step; no snapshots (see             *)
(* KRaftSnapshot.tla); AddVoter does not wait for the new voter to catch   *)
(* up (that wait is for availability only).                               *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    Server,        \* replica ids
    BootstrapIds,  \* ids of the bootstrap voters, all with uuid 1
    MayStand(_, _),\* MayStand(s, e): id s may stand in epoch e (AnyStands unless scripted)
    MayFetch(_, _),\* MayFetch(s, e): id s may fetch in epoch e (AnyStands unless scripted)
    MayChange(_, _),\* MayChange(l, k): leader l may add/remove key k (AnyStands unless scripted)
    MaxEpoch,
    Nil,
    MaxOffset,
    MaxUuid,       \* DiskLoss only while uuid < MaxUuid
    Faults,        \* TRUE: DropMessage and Restart are enabled
    DataRecords,   \* TRUE: ClientAppend is enabled
    StableLeader,  \* TRUE: no ElectionTimeout while some replica is Leader (liveness)
    MsgLimit,      \* state constraint: messages in flight
    Mutant         \* "none" | "EarlyVoterChange" | "RemovedLeaderCountsItself"

ASSUME BootstrapIds \subseteq Server /\ BootstrapIds # {}
ASSUME MaxUuid \in Nat \ {0}

\* Models normally let every id stand in every epoch; a model may script the elections
\* (which only removes behaviours, so a violation it finds is one of the full spec).
AnyStands(s, e) == TRUE

VARIABLES
    currentEpoch, votedFor, leader, state,
    log,           \* persisted
    hwm,
    uuid,          \* the storage uuid of each id's disk
    votesGranted,  \* keys that granted
    endOffsetOf,   \* leader's view: key -> fetch offset
    messages,
    committed      \* ghost: [index, record, epoch] committed by a leader in epoch

vars == <<currentEpoch, votedFor, leader, state, log, hwm, uuid, votesGranted,
          endOffsetOf, messages, committed>>

States == {"Unattached", "Voted", "Candidate", "Leader", "Follower", "Resigned"}
Uuids == 1..MaxUuid
Keys == Server \X Uuids
Bootstrap == BootstrapIds \X {1}
Key(s) == <<s, uuid[s]>>
Max(S) == CHOOSE x \in S : \A y \in S : y <= x
Min(a, b) == IF a < b THEN a ELSE b
MaxOf(a, b) == IF a > b THEN a ELSE b
Quorum(S, V) == Cardinality(S \cap V) * 2 > Cardinality(V)

----------------------------------------------------------------------------
(* Log and voter-set helpers *)

LEO(s) == Len(log[s])
EpochAt(s, i) == IF i = 0 THEN 0 ELSE log[s][i].epoch
LastEpoch(s) == EpochAt(s, LEO(s))
VoterIdx(s, n) == {i \in 1..n : log[s][i].kind = "Voters"}
VotersAt(s, n) == IF VoterIdx(s, n) = {} THEN Bootstrap ELSE log[s][Max(VoterIdx(s, n))].voters
VotersOf(s) == VotersAt(s, LEO(s))
IsVoter(s) == Key(s) \in VotersOf(s)
FirstOfEpoch(s, e) == Max({0} \cup {i \in 1..LEO(s) : EpochAt(s, i) < e}) + 1
LastVotersIdx(s) == Max({0} \cup VoterIdx(s, LEO(s)))

EndOffsetForEpoch(s, e) == Max({i \in 0..LEO(s) : EpochAt(s, i) <= e})

UpToDate(lastEpoch, lastOffset, s) ==
    \/ lastEpoch > LastEpoch(s)
    \/ lastEpoch = LastEpoch(s) /\ lastOffset >= LEO(s)

Send(m) == messages' = messages \cup {m}
Reply(req, resp) == messages' = (messages \ {req}) \cup {resp}
Discard(m) == messages' = messages \ {m}

NoVoters == {}
Rec(e, k, v) == [epoch |-> e, kind |-> k, voters |-> v]

----------------------------------------------------------------------------
Init ==
    /\ currentEpoch = [s \in Server |-> 0]
    /\ votedFor = [s \in Server |-> Nil]
    /\ leader = [s \in Server |-> Nil]
    /\ state = [s \in Server |-> "Unattached"]
    /\ log = [s \in Server |-> <<>>]
    /\ hwm = [s \in Server |-> 0]
    /\ uuid = [s \in Server |-> 1]
    /\ votesGranted = [s \in Server |-> {}]
    /\ endOffsetOf = [s \in Server |-> [k \in Keys |-> 0]]
    /\ messages = {}
    /\ committed = {}

BumpEpoch(s, e) ==
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = e]
    /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    /\ state' = [state EXCEPT ![s] = "Unattached"]

----------------------------------------------------------------------------
(* Election: only a replica whose own key is in its voter set may stand. *)

ElectionTimeout(s) ==
    /\ state[s] \in {"Unattached", "Voted", "Follower", "Candidate", "Resigned"}
    /\ IsVoter(s)
    /\ currentEpoch[s] < MaxEpoch
    /\ MayStand(s, currentEpoch[s] + 1)
    /\ StableLeader => \A t \in Server : state[t] # "Leader"
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = @ + 1]
    /\ state' = [state EXCEPT ![s] = "Candidate"]
    /\ votedFor' = [votedFor EXCEPT ![s] = Key(s)]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    /\ votesGranted' = [votesGranted EXCEPT ![s] = {Key(s)}]
    /\ messages' = messages \cup
         {[type |-> "VoteRequest", from |-> s, to |-> k[1], voterKey |-> k,
           candidateKey |-> Key(s), epoch |-> currentEpoch[s] + 1,
           lastEpoch |-> LastEpoch(s), lastOffset |-> LEO(s)] : k \in VotersOf(s) \ {Key(s)}}
    /\ UNCHANGED <<log, hwm, uuid, endOffsetOf, committed>>

\* Any replica may grant, whether or not it or the candidate is in its voter set.
HandleVoteRequest(m) ==
    LET s == m.to
        newer == m.epoch > currentEpoch[s]
        epochNow == IF newer THEN m.epoch ELSE currentEpoch[s]
        vote == IF newer THEN Nil ELSE votedFor[s]
        grant == /\ m.voterKey = Key(s)
                 /\ m.epoch = epochNow
                 /\ vote \in {Nil, m.candidateKey}
                 /\ ~newer => state[s] \in {"Unattached", "Voted"}
                 /\ UpToDate(m.lastEpoch, m.lastOffset, s)
    IN
    /\ m.type = "VoteRequest"
    /\ IF newer \/ grant
         THEN /\ currentEpoch' = [currentEpoch EXCEPT ![s] = epochNow]
              /\ votedFor' = [votedFor EXCEPT ![s] = IF grant THEN m.candidateKey ELSE Nil]
              /\ leader' = [leader EXCEPT ![s] = Nil]
              /\ state' = [state EXCEPT ![s] = IF grant THEN "Voted" ELSE "Unattached"]
         ELSE UNCHANGED <<currentEpoch, votedFor, leader, state>>
    \* a same-epoch rejection tells the candidate nothing: it is not sent (as if lost)
    /\ IF grant \/ epochNow > m.epoch
         THEN Reply(m, [type |-> "VoteResponse", from |-> s, to |-> m.from, voterKey |-> Key(s),
                 epoch |-> epochNow, granted |-> grant])
         ELSE Discard(m)
    /\ UNCHANGED <<log, hwm, uuid, votesGranted, endOffsetOf, committed>>

HandleVoteResponse(m) ==
    LET s == m.to IN
    /\ m.type = "VoteResponse"
    /\ IF m.epoch > currentEpoch[s]
         THEN /\ BumpEpoch(s, m.epoch)
              /\ UNCHANGED votesGranted
         ELSE /\ votesGranted' = IF state[s] = "Candidate" /\ m.epoch = currentEpoch[s]
                                      /\ m.granted
                                   THEN [votesGranted EXCEPT ![s] = @ \cup {m.voterKey}]
                                   ELSE votesGranted
              /\ UNCHANGED <<currentEpoch, votedFor, leader, state>>
    /\ Discard(m)
    /\ UNCHANGED <<log, hwm, uuid, endOffsetOf, committed>>

\* Votes count only from keys in the candidate's current voter set.
BecomeLeader(s) ==
    /\ state[s] = "Candidate"
    /\ Quorum(votesGranted[s], VotersOf(s))
    /\ LEO(s) < MaxOffset
    /\ state' = [state EXCEPT ![s] = "Leader"]
    /\ leader' = [leader EXCEPT ![s] = s]
    /\ log' = [log EXCEPT ![s] = Append(@, Rec(currentEpoch[s], "LeaderChange", NoVoters))]
    /\ endOffsetOf' = [endOffsetOf EXCEPT ![s] = [k \in Keys |-> 0]]
    \* sent to every replica so observers (a new disk, a voter to be) find the leader too
    /\ messages' = messages \cup
         {[type |-> "BeginQuorumEpoch", from |-> s, to |-> t, epoch |-> currentEpoch[s]]
            : t \in Server \ {s}}
    /\ UNCHANGED <<currentEpoch, votedFor, hwm, uuid, votesGranted, committed>>

HandleBeginQuorumEpochRequest(m) ==
    LET s == m.to IN
    /\ m.type = "BeginQuorumEpoch"
    /\ IF \/ m.epoch > currentEpoch[s]
          \/ m.epoch = currentEpoch[s] /\ state[s] \in {"Unattached", "Voted", "Candidate"}
         THEN /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
              /\ votedFor' = [votedFor EXCEPT ![s] = IF m.epoch > currentEpoch[s] THEN Nil ELSE @]
              /\ leader' = [leader EXCEPT ![s] = m.from]
              /\ state' = [state EXCEPT ![s] = "Follower"]
         ELSE UNCHANGED <<currentEpoch, votedFor, leader, state>>
    /\ Discard(m)
    /\ UNCHANGED <<log, hwm, uuid, votesGranted, endOffsetOf, committed>>

----------------------------------------------------------------------------
(* Replication *)

ClientAppend(s) ==
    /\ DataRecords
    /\ state[s] = "Leader"
    /\ LEO(s) < MaxOffset
    /\ log' = [log EXCEPT ![s] = Append(@, Rec(currentEpoch[s], "Data", NoVoters))]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, hwm, uuid, votesGranted,
                   endOffsetOf, messages, committed>>

InFlight(s) ==
    \E m \in messages :
        \/ m.type = "FetchRequest" /\ m.from = s
        \/ m.type = "FetchResponse" /\ m.to = s

\* Followers and observers alike fetch from the leader they know.
SendFetchRequest(s) ==
    /\ state[s] = "Follower"
    /\ MayFetch(s, currentEpoch[s])
    /\ ~InFlight(s)
    /\ Send([type |-> "FetchRequest", from |-> s, to |-> leader[s], replicaKey |-> Key(s),
             epoch |-> currentEpoch[s], hwm |-> hwm[s], fetchOffset |-> LEO(s), lastFetchedEpoch |-> LastEpoch(s)])
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, hwm, uuid, votesGranted,
                   endOffsetOf, committed>>

FetchResp(m, l, result, entries, divOffset) ==
    [type |-> "FetchResponse", from |-> l, to |-> m.from, epoch |-> currentEpoch[l],
     leader |-> leader[l], result |-> result, fetchOffset |-> m.fetchOffset,
     entries |-> entries, hwm |-> hwm[l], divEpoch |-> EpochAt(l, Min(divOffset, LEO(l))),
     divOffset |-> divOffset]

\* A leader keeps serving Fetch even after it removed itself, until it resigns.
HandleFetchRequest(m) ==
    LET l == m.to
        fo == m.fetchOffset
        valid == fo <= LEO(l) /\ EpochAt(l, fo) = m.lastFetchedEpoch
    IN
    /\ m.type = "FetchRequest"
    \* long poll: a caught-up fetch waits at the leader until there is something new
    /\ ~(state[l] = "Leader" /\ m.epoch = currentEpoch[l] /\ valid /\ fo = LEO(l)
         /\ endOffsetOf[l][m.replicaKey] = fo /\ hwm[l] <= m.hwm)
    /\ IF state[l] = "Leader" /\ m.epoch = currentEpoch[l]
         THEN IF valid
                THEN /\ Reply(m, FetchResp(m, l, "ok",
                                           IF fo < LEO(l) THEN <<log[l][fo + 1]>> ELSE <<>>, 0))
                     /\ endOffsetOf' = [endOffsetOf EXCEPT ![l][m.replicaKey] = fo]
                ELSE /\ Reply(m, FetchResp(m, l, "diverging", <<>>,
                                           EndOffsetForEpoch(l, m.lastFetchedEpoch)))
                     /\ UNCHANGED endOffsetOf
         ELSE /\ IF currentEpoch[l] > m.epoch  \* tell the fetcher about the newer epoch
                   THEN Reply(m, FetchResp(m, l, "fenced", <<>>, 0))
                   ELSE Discard(m)
              /\ UNCHANGED endOffsetOf
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, hwm, uuid, votesGranted,
                   committed>>

HandleFetchResponse(m) ==
    LET s == m.to
        current == state[s] = "Follower" /\ currentEpoch[s] = m.epoch /\ leader[s] = m.from
                   /\ LEO(s) = m.fetchOffset
    IN
    /\ m.type = "FetchResponse"
    /\ CASE current /\ m.result = "ok" ->
              /\ log' = [log EXCEPT ![s] = @ \o m.entries]
              /\ hwm' = [hwm EXCEPT ![s] = MaxOf(@, Min(m.hwm, LEO(s) + Len(m.entries)))]
              /\ UNCHANGED <<currentEpoch, votedFor, leader, state>>
         [] current /\ m.result = "diverging" ->
              \* truncation also reverts any Voters record past the cut
              /\ log' = [log EXCEPT ![s] =
                           SubSeq(@, 1, Min(m.divOffset, EndOffsetForEpoch(s, m.divEpoch)))]
              /\ UNCHANGED <<currentEpoch, votedFor, leader, state, hwm>>
         [] m.result = "fenced" /\ m.epoch > currentEpoch[s] ->
              /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
              /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
              /\ leader' = [leader EXCEPT ![s] = m.leader]
              /\ state' = [state EXCEPT ![s] = IF m.leader = Nil THEN "Unattached"
                                                ELSE "Follower"]
              /\ UNCHANGED <<log, hwm>>
         [] OTHER -> UNCHANGED <<currentEpoch, votedFor, leader, state, log, hwm>>
    /\ Discard(m)
    /\ UNCHANGED <<uuid, votesGranted, endOffsetOf, committed>>

\* The HWM counts the current voters (the last Voters record in the leader's log, committed
\* or not); the leader counts itself only if it is one of them. It never goes down.
Agree(l, n) ==
    {k \in VotersOf(l) : IF k = Key(l) THEN LEO(l) >= n ELSE endOffsetOf[l][k] >= n}
    \cup (IF Mutant = "RemovedLeaderCountsItself" THEN {Key(l)} ELSE {})

AdvanceHighWatermark(l) ==
    LET ns == {n \in (hwm[l] + 1)..LEO(l) :
                 EpochAt(l, n) = currentEpoch[l] /\ Cardinality(Agree(l, n)) * 2 > Cardinality(VotersOf(l))}
        n == Max(ns)
    IN
    /\ state[l] = "Leader"
    /\ ns # {}
    /\ hwm' = [hwm EXCEPT ![l] = n]
    /\ committed' = committed \cup
         {[index |-> i, record |-> log[l][i], epoch |-> currentEpoch[l]] :
            i \in {j \in (hwm[l] + 1)..n :
                     ~\E c \in committed : c.index = j /\ c.record = log[l][j]}}
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, uuid, votesGranted,
                   endOffsetOf, messages>>

----------------------------------------------------------------------------
(* Voter changes *)

\* The known bug of single-server changes (Ongaro, raft-dev 2015) is avoided by waiting
\* for the LeaderChange record of the leader's epoch to commit; the mutant does not wait.
CanChangeVoters(l) ==
    /\ state[l] = "Leader"
    /\ LEO(l) < MaxOffset
    /\ LastVotersIdx(l) <= hwm[l]
    /\ Mutant = "EarlyVoterChange" \/ hwm[l] >= FirstOfEpoch(l, currentEpoch[l])

\* The operator adds the replica (id, current uuid), e.g. a replacement disk.
AddVoter(l, s) ==
    /\ CanChangeVoters(l)
    /\ MayChange(l, Key(s))
    /\ Key(s) \notin VotersOf(l)
    /\ log' = [log EXCEPT ![l] = Append(@, Rec(currentEpoch[l], "Voters", VotersOf(l) \cup {Key(s)}))]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, hwm, uuid, votesGranted,
                   endOffsetOf, messages, committed>>

RemoveVoter(l, k) ==
    /\ CanChangeVoters(l)
    /\ MayChange(l, k)
    /\ k \in VotersOf(l)
    /\ Cardinality(VotersOf(l)) > 1
    /\ log' = [log EXCEPT ![l] = Append(@, Rec(currentEpoch[l], "Voters", VotersOf(l) \ {k}))]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, hwm, uuid, votesGranted,
                   endOffsetOf, messages, committed>>

\* A leader that removed itself resigns once that change is committed.
Resign(l) ==
    /\ state[l] = "Leader"
    /\ ~IsVoter(l)
    /\ LastVotersIdx(l) <= hwm[l]
    /\ state' = [state EXCEPT ![l] = "Resigned"]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, log, hwm, uuid, votesGranted,
                   endOffsetOf, messages, committed>>

----------------------------------------------------------------------------
(* Faults *)

Restart(s) ==
    /\ Faults
    /\ state' = [state EXCEPT ![s] =
                   CASE leader[s] = s -> "Resigned"
                     [] leader[s] # Nil -> "Follower"
                     [] votedFor[s] # Nil -> "Voted"
                     [] OTHER -> "Unattached"]
    /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
    /\ endOffsetOf' = [endOffsetOf EXCEPT ![s] = [k \in Keys |-> 0]]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, log, hwm, uuid, messages, committed>>

\* The disk is replaced: empty log, no quorum state, a new storage uuid.
DiskLoss(s) ==
    /\ Faults
    /\ uuid[s] < MaxUuid
    /\ uuid' = [uuid EXCEPT ![s] = @ + 1]
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = 0]
    /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    /\ state' = [state EXCEPT ![s] = "Unattached"]
    /\ log' = [log EXCEPT ![s] = <<>>]
    /\ hwm' = [hwm EXCEPT ![s] = 0]
    /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
    /\ endOffsetOf' = [endOffsetOf EXCEPT ![s] = [k \in Keys |-> 0]]
    /\ UNCHANGED <<messages, committed>>

DropMessage(m) ==
    /\ Faults
    /\ Discard(m)
    /\ UNCHANGED <<currentEpoch, votedFor, leader, state, log, hwm, uuid, votesGranted,
                   endOffsetOf, committed>>

----------------------------------------------------------------------------
\* One disjunct per message handler, so that TLC names each step after its handler.
ReceiveHandleVoteRequest == \E m \in messages : HandleVoteRequest(m)
ReceiveHandleVoteResponse == \E m \in messages : HandleVoteResponse(m)
ReceiveHandleBeginQuorumEpochRequest == \E m \in messages : HandleBeginQuorumEpochRequest(m)
ReceiveHandleFetchRequest == \E m \in messages : HandleFetchRequest(m)
ReceiveHandleFetchResponse == \E m \in messages : HandleFetchResponse(m)
ReceiveDropMessage == \E m \in messages : DropMessage(m)

Next ==
    \/ \E s \in Server : ElectionTimeout(s)
    \/ \E s \in Server : BecomeLeader(s)
    \/ \E s \in Server : ClientAppend(s)
    \/ \E s \in Server : SendFetchRequest(s)
    \/ \E s \in Server : AdvanceHighWatermark(s)
    \/ \E s \in Server : Resign(s)
    \/ \E s \in Server : Restart(s)
    \/ \E s \in Server : DiskLoss(s)
    \/ \E s, t \in Server : AddVoter(s, t)
    \/ \E s \in Server, k \in Keys : RemoveVoter(s, k)
    \/ ReceiveHandleVoteRequest
    \/ ReceiveHandleVoteResponse
    \/ ReceiveHandleBeginQuorumEpochRequest
    \/ ReceiveHandleFetchRequest
    \/ ReceiveHandleFetchResponse
    \/ ReceiveDropMessage

Spec == Init /\ [][Next]_vars

\* Liveness model: a healthy network and fair progress; elections, client writes and
\* voter-change requests stay unfair (they may or may not happen). Fairness is per
\* (receiver, sender) pair so that no sender's message starves behind another's.
HandleAny(m) ==
    \/ HandleVoteRequest(m) \/ HandleVoteResponse(m) \/ HandleBeginQuorumEpochRequest(m)
    \/ HandleFetchRequest(m) \/ HandleFetchResponse(m)

FairSpec ==
    /\ Spec
    /\ \A s \in Server :
         /\ WF_vars(BecomeLeader(s))
         /\ WF_vars(SendFetchRequest(s))
         /\ WF_vars(AdvanceHighWatermark(s))
         /\ WF_vars(Resign(s))
    /\ \A s, t \in Server : WF_vars(\E m \in messages : m.to = s /\ m.from = t /\ HandleAny(m))

----------------------------------------------------------------------------
(* Invariants *)

Record == [epoch : 0..MaxEpoch, kind : {"LeaderChange", "Data", "Voters"}, voters : SUBSET Keys]

TypeOK ==
    /\ currentEpoch \in [Server -> 0..MaxEpoch]
    /\ votedFor \in [Server -> Keys \cup {Nil}]
    /\ leader \in [Server -> Server \cup {Nil}]
    /\ state \in [Server -> States]
    /\ uuid \in [Server -> Uuids]
    /\ hwm \in [Server -> 0..MaxOffset]
    /\ \A s \in Server : log[s] \in Seq(Record) /\ LEO(s) <= MaxOffset
    /\ votesGranted \in [Server -> SUBSET Keys]
    /\ endOffsetOf \in [Server -> [Keys -> 0..MaxOffset]]

ElectionSafety ==
    \A s, t \in Server :
        (s # t /\ state[s] = "Leader" /\ state[t] = "Leader") => currentEpoch[s] # currentEpoch[t]

LogMatching ==
    \A s, t \in Server :
        \A i \in 1..Min(LEO(s), LEO(t)) :
            EpochAt(s, i) = EpochAt(t, i) => SubSeq(log[s], 1, i) = SubSeq(log[t], 1, i)

Holds(s, c) == c.index <= LEO(s) /\ log[s][c.index] = c.record

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

IsCommitted(i, r) == \E c \in committed : c.index = i /\ c.record = r

\* No log holds two Voters records that are not committed.
AtMostOneUncommittedVoterChange ==
    \A s \in Server :
        Cardinality({i \in VoterIdx(s, LEO(s)) : ~IsCommitted(i, log[s][i])}) <= 1

\* Action property: whenever a leader's HWM moves to n, a majority of its current voters
\* hold its log up to n (by the leader's own record of their fetch offsets and, if it is a
\* voter, its own log). A removed leader that counted itself would break it.
MajorityReachedHighWatermark ==
    [][\A l \in Server :
         (state'[l] = "Leader" /\ state[l] = "Leader" /\ hwm'[l] > hwm[l]) =>
            LET V == VotersAt(l, LEO(l))
                holders == {k \in V : IF k = Key(l) THEN TRUE ELSE endOffsetOf[l][k] >= hwm'[l]}
            IN Cardinality(holders) * 2 > Cardinality(V)]_vars

\* HWM never decreases, except when the disk is lost.
HighWatermarkMonotonic == [][\A s \in Server : hwm'[s] >= hwm[s] \/ uuid'[s] # uuid[s]]_vars

\* Liveness: a voter change appended by a leader is eventually resolved (committed, or the
\* leader is gone), on a healthy network (Faults = FALSE, StableLeader = TRUE).
ReconfigEventuallyCompletes ==
    \A l \in Server :
        (state[l] = "Leader" /\ LastVotersIdx(l) > hwm[l]) ~>
            (state[l] # "Leader" \/ LastVotersIdx(l) <= hwm[l])

StateConstraint == Cardinality(messages) <= MsgLimit

\* Sound: bootstrap voters are interchangeable (they differ only by name).
Symm == Permutations(BootstrapIds)  \* only with MayStand <- AnyStands
=============================================================================
