-------------------------------- MODULE KRaft --------------------------------
(***************************************************************************)
(* Leader election and log replication of Kafka's Raft (KIP-595).          *)
(*                                                                         *)
(* Pull-based replication: followers and observers send Fetch to the      *)
(* leader with their log end offset and the epoch of their last record;   *)
(* the leader answers with records, or with a diverging epoch and end     *)
(* offset when the two do not match its log.  Elections use Vote,         *)
(* BeginQuorumEpoch announces a new leader, EndQuorumEpoch lets a leader  *)
(* resign gracefully.  A new leader first appends a LeaderChange control  *)
(* record, and the high watermark only moves to an offset of the leader's *)
(* own epoch.                                                             *)
(*                                                                         *)
(* The network is a bag of messages: a message may be lost, duplicated or *)
(* delivered in any order.  Servers crash and restart: the quorum-state   *)
(* (epoch, vote, leader) and the log are durable (KIP-595: appends to the *)
(* metadata log are fsynced before they are acknowledged); the role, the  *)
(* high watermark and all leader/candidate bookkeeping are lost.          *)
(*                                                                         *)
(* Action names are the trace event names of the implementation.          *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    Server,       \* all replicas
    Voters,       \* the voter set (static here; KRaftReconfig changes it)
    Values,       \* client values a leader may append
    MaxEpoch,     \* no election beyond this epoch
    MaxLogLen,    \* ClientAppend only while the leader's log is shorter
    MaxMessages,  \* a send is enabled only while the bag holds fewer messages
    MaxRestarts,  \* total number of crashes
    Nil,          \* "none" for votedFor / leader
    Mutant        \* "none" in every real model; see spec/mutants/

ASSUME /\ Voters \subseteq Server /\ Voters # {}
       /\ Nil \notin Server
       /\ MaxEpoch \in Nat /\ MaxLogLen \in Nat /\ MaxMessages \in Nat /\ MaxRestarts \in Nat
       /\ Mutant \in {"none", "HwmNoEpochCheck", "VotedForNotPersisted", "LeaderKeepsStaleHwm"}

Observers == Server \ Voters

States == {"Unattached", "Voted", "Candidate", "Leader", "Follower", "Resigned"}

\* The value of the LeaderChange control record a new leader appends first.
LC == "LC"

VARIABLES
    state,          \* role of each server
    currentEpoch,   \* persisted (quorum-state)
    votedFor,       \* persisted (quorum-state)
    leader,         \* persisted (quorum-state): the known leader of currentEpoch, or Nil
    log,            \* persisted: sequence of [epoch, value]
    highWatermark,  \* volatile: records 1..highWatermark are committed
    alive,          \* FALSE while crashed
    endOffset,      \* leader: endOffset[l][f] = fetch offset last validated for f
    votesGranted,   \* candidate: voters that granted the vote of this epoch
    endorsed,       \* leader: voters that acknowledged this epoch (BeginQuorumEpoch / Fetch)
    messages,       \* the network: message -> number of copies
    restarts,       \* crashes so far
    elected,        \* history: <<epoch, server>> of every BecomeLeader
    committed       \* history: <<offset, record, epoch>> of every record exposed by a HWM,
                    \* with the epoch in which it was first exposed

serverVars == <<state, currentEpoch, votedFor, leader, alive>>
logVars == <<log, highWatermark>>
leaderVars == <<endOffset, votesGranted, endorsed>>
ghostVars == <<restarts, elected, committed>>
vars == <<serverVars, logVars, leaderVars, messages, ghostVars>>

-----------------------------------------------------------------------------
(* Helpers *)

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b

IsMajority(S) == 2 * Cardinality(S \cap Voters) > Cardinality(Voters)

LastEpoch(l) == IF l = <<>> THEN 0 ELSE l[Len(l)].epoch

\* The end offset of the largest epoch <= e in l (epochs never decrease along a log).
EndOffsetForEpoch(l, e) == Cardinality({i \in 1..Len(l) : l[i].epoch <= e})
EpochAt(l, n) == IF n = 0 THEN 0 ELSE l[n].epoch

\* KIP-595: later last epoch wins, on a tie the longer log.
LogUpToDate(lastEpoch, endOff, l) ==
    \/ lastEpoch > LastEpoch(l)
    \/ lastEpoch = LastEpoch(l) /\ endOff >= Len(l)

NoOffsets == [t \in Server |-> 0]

\* The HWM a Fetch response carries when the leader does not know it (Kafka's -1).
UnknownHwm == -1

\* A new leader does not know the HWM until it first advances it in its own epoch (Kafka's
\* LeaderState starts with an empty high watermark and answers fetches with -1): the HWM it
\* held as a follower may lag behind what another follower already learned.  highWatermark[l]
\* stays the HWM of l's log (never lowered); it is known to the leader once it points at a
\* record of the leader's epoch, which only AdvanceHighWatermark can make it do.
HwmKnown(l) ==
    \/ Mutant = "LeaderKeepsStaleHwm"
    \/ highWatermark[l] > 0 /\ log[l][highWatermark[l]].epoch = currentEpoch[l]

\* The HWM a leader puts in a Fetch response.
LeaderHwm(l) == IF HwmKnown(l) THEN highWatermark[l] ELSE UnknownHwm

\* Bag operations; a bag's domain holds only messages with at least one copy.
RECURSIVE SumCounts(_, _)
SumCounts(b, D) == IF D = {} THEN 0
                   ELSE LET m == CHOOSE x \in D : TRUE IN b[m] + SumCounts(b, D \ {m})
BagSize(b) == SumCounts(b, DOMAIN b)
Add(b, m) == IF m \in DOMAIN b THEN [b EXCEPT ![m] = @ + 1] ELSE b @@ (m :> 1)
Remove(b, m) == IF b[m] > 1 THEN [b EXCEPT ![m] = @ - 1]
                ELSE [x \in DOMAIN b \ {m} |-> b[x]]
RECURSIVE AddAll(_, _)
AddAll(b, S) == IF S = {} THEN b
                ELSE LET m == CHOOSE x \in S : TRUE IN AddAll(Add(b, m), S \ {m})

Room(k) == BagSize(messages) + k <= MaxMessages
Discard(m) == messages' = Remove(messages, m)
Reply(resp, req) == messages' = Add(Remove(messages, req), resp)

VoteRequests(c, e) ==
    {[type |-> "VoteRequest", src |-> c, dst |-> t, epoch |-> e,
      lastEpoch |-> LastEpoch(log[c]), endOffset |-> Len(log[c])] : t \in Voters \ {c}}

\* The orderings of a set, for the preferred-successor list of EndQuorumEpoch.
Orderings(S) == {f \in [1..Cardinality(S) -> S] : \A i, j \in DOMAIN f : i # j => f[i] # f[j]}

FetchResponse(src, dst, e, ldr, kind, req, entries, hwm, divEpoch, divEnd) ==
    [type |-> "FetchResponse", src |-> src, dst |-> dst, epoch |-> e, leader |-> ldr,
     kind |-> kind, fetchOffset |-> req.fetchOffset, lastFetchedEpoch |-> req.lastFetchedEpoch,
     entries |-> entries, hwm |-> hwm, divEpoch |-> divEpoch, divEnd |-> divEnd]

\* Records 1..n of log l become committed in epoch e (first exposure only).
Commit(l, n, e) ==
    committed' = committed \cup
        {<<i, l[i], e>> : i \in {j \in 1..n : ~\E c \in committed : c[1] = j /\ c[2] = l[j]}}

\* The persisted election state says what a server restarts as.
RestartState(s, vf) ==
    IF leader[s] = s THEN "Resigned"
    ELSE IF leader[s] # Nil THEN "Follower"
    ELSE IF vf = s THEN "Candidate"
    ELSE IF vf # Nil THEN "Voted"
    ELSE "Unattached"

-----------------------------------------------------------------------------
(* Initial state *)

Init ==
    /\ state = [s \in Server |-> "Unattached"]
    /\ currentEpoch = [s \in Server |-> 0]
    /\ votedFor = [s \in Server |-> Nil]
    /\ leader = [s \in Server |-> Nil]
    /\ log = [s \in Server |-> <<>>]
    /\ highWatermark = [s \in Server |-> 0]
    /\ alive = [s \in Server |-> TRUE]
    /\ endOffset = [s \in Server |-> NoOffsets]
    /\ votesGranted = [s \in Server |-> {}]
    /\ endorsed = [s \in Server |-> {}]
    /\ messages = <<>>
    /\ restarts = 0
    /\ elected = {}
    /\ committed = {}

-----------------------------------------------------------------------------
(* Election *)

\* A voter that hears nothing from a leader starts an election in the next epoch and votes
\* for itself, persisting the vote before the requests go out.
ElectionTimeout(s) ==
    /\ alive[s]
    /\ s \in Voters
    /\ state[s] \in {"Unattached", "Voted", "Follower", "Candidate", "Resigned"}
    /\ currentEpoch[s] < MaxEpoch
    /\ Room(Cardinality(Voters) - 1)
    /\ state' = [state EXCEPT ![s] = "Candidate"]
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = @ + 1]
    /\ votedFor' = [votedFor EXCEPT ![s] = s]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    /\ votesGranted' = [votesGranted EXCEPT ![s] = {s}]
    /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
    /\ endorsed' = [endorsed EXCEPT ![s] = {}]
    /\ messages' = AddAll(messages, VoteRequests(s, currentEpoch[s] + 1))
    /\ UNCHANGED <<alive, logVars, ghostVars>>

\* KIP-595 vote handling, in order: reject an older epoch (adopt a newer one), one vote per
\* epoch, the candidate must be a voter, its log must be at least as up-to-date.
HandleVoteRequest(m) ==
    LET s == m.dst
        c == m.src
        newer == m.epoch > currentEpoch[s]
        epoch1 == IF newer THEN m.epoch ELSE currentEpoch[s]
        voted1 == IF newer THEN Nil ELSE votedFor[s]
        grant == /\ m.epoch = epoch1
                 /\ voted1 \in {Nil, c}
                 /\ c \in Voters
                 /\ LogUpToDate(m.lastEpoch, m.endOffset, log[s])
    IN
    /\ m.type = "VoteRequest"
    /\ alive[s]
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = epoch1]
    /\ votedFor' = [votedFor EXCEPT ![s] = IF grant THEN c ELSE voted1]
    /\ leader' = [leader EXCEPT ![s] = IF newer THEN Nil ELSE @]
    /\ state' = [state EXCEPT ![s] =
                    IF newer THEN (IF grant THEN "Voted" ELSE "Unattached")
                    ELSE IF grant /\ @ = "Unattached" THEN "Voted"
                    ELSE @]
    /\ IF newer
       THEN /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
            /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
            /\ endorsed' = [endorsed EXCEPT ![s] = {}]
       ELSE UNCHANGED leaderVars
    /\ Reply([type |-> "VoteResponse", src |-> s, dst |-> c, epoch |-> epoch1,
              granted |-> grant], m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

HandleVoteResponse(m) ==
    LET c == m.dst IN
    /\ m.type = "VoteResponse"
    /\ alive[c]
    /\ IF m.epoch > currentEpoch[c]
       THEN \* an election with a larger epoch is under way
            /\ state' = [state EXCEPT ![c] = "Unattached"]
            /\ currentEpoch' = [currentEpoch EXCEPT ![c] = m.epoch]
            /\ votedFor' = [votedFor EXCEPT ![c] = Nil]
            /\ leader' = [leader EXCEPT ![c] = Nil]
            /\ endOffset' = [endOffset EXCEPT ![c] = NoOffsets]
            /\ votesGranted' = [votesGranted EXCEPT ![c] = {}]
            /\ endorsed' = [endorsed EXCEPT ![c] = {}]
       ELSE /\ IF state[c] = "Candidate" /\ m.epoch = currentEpoch[c] /\ m.granted
               THEN votesGranted' = [votesGranted EXCEPT ![c] = @ \cup {m.src}]
               ELSE UNCHANGED votesGranted
            /\ UNCHANGED <<state, currentEpoch, votedFor, leader, endOffset, endorsed>>
    /\ Discard(m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

\* A candidate with a majority becomes leader, appends the LeaderChange record of its epoch
\* and announces itself with BeginQuorumEpoch.
BecomeLeader(c) ==
    /\ alive[c]
    /\ state[c] = "Candidate"
    /\ IsMajority(votesGranted[c])
    /\ Room(Cardinality(Voters) - 1)
    /\ state' = [state EXCEPT ![c] = "Leader"]
    /\ leader' = [leader EXCEPT ![c] = c]
    /\ log' = [log EXCEPT ![c] = Append(@, [epoch |-> currentEpoch[c], value |-> LC])]
    /\ endOffset' = [endOffset EXCEPT ![c] = NoOffsets]
    /\ endorsed' = [endorsed EXCEPT ![c] = {c}]
    /\ elected' = elected \cup {<<currentEpoch[c], c>>}
    /\ messages' = AddAll(messages,
          {[type |-> "BeginQuorumEpochRequest", src |-> c, dst |-> t, epoch |-> currentEpoch[c]]
             : t \in Voters \ {c}})
    /\ UNCHANGED <<currentEpoch, votedFor, alive, highWatermark, votesGranted, restarts, committed>>

\* Accept if the epoch is newer, or the same epoch with no conflicting known leader.
HandleBeginQuorumEpochRequest(m) ==
    LET s == m.dst
        l == m.src
        newer == m.epoch > currentEpoch[s]
        accept == newer \/ (m.epoch = currentEpoch[s] /\ leader[s] \in {Nil, l})
    IN
    /\ m.type = "BeginQuorumEpochRequest"
    /\ alive[s]
    /\ IF accept
       THEN /\ state' = [state EXCEPT ![s] = "Follower"]
            /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
            /\ votedFor' = [votedFor EXCEPT ![s] = IF newer THEN Nil ELSE @]
            /\ leader' = [leader EXCEPT ![s] = l]
            /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
            /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
            /\ endorsed' = [endorsed EXCEPT ![s] = {}]
       ELSE UNCHANGED <<state, currentEpoch, votedFor, leader, leaderVars>>
    /\ Reply([type |-> "BeginQuorumEpochResponse", src |-> s, dst |-> l,
              epoch |-> IF accept THEN m.epoch ELSE currentEpoch[s],
              leader |-> IF accept THEN l ELSE leader[s]], m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

\* Success records the endorsement; a larger epoch (FENCED_LEADER_EPOCH) ends the leadership.
HandleBeginQuorumEpochResponse(m) ==
    LET l == m.dst IN
    /\ m.type = "BeginQuorumEpochResponse"
    /\ alive[l]
    /\ IF m.epoch > currentEpoch[l]
       THEN /\ state' = [state EXCEPT ![l] = IF m.leader # Nil THEN "Follower" ELSE "Unattached"]
            /\ currentEpoch' = [currentEpoch EXCEPT ![l] = m.epoch]
            /\ votedFor' = [votedFor EXCEPT ![l] = Nil]
            /\ leader' = [leader EXCEPT ![l] = m.leader]
            /\ endOffset' = [endOffset EXCEPT ![l] = NoOffsets]
            /\ votesGranted' = [votesGranted EXCEPT ![l] = {}]
            /\ endorsed' = [endorsed EXCEPT ![l] = {}]
       ELSE /\ IF state[l] = "Leader" /\ m.epoch = currentEpoch[l] /\ m.leader = l
               THEN endorsed' = [endorsed EXCEPT ![l] = @ \cup {m.src}]
               ELSE UNCHANGED endorsed
            /\ UNCHANGED <<state, currentEpoch, votedFor, leader, endOffset, votesGranted>>
    /\ Discard(m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

\* Graceful resignation: EndQuorumEpoch to the other voters with the preferred successors
\* sorted by replicated offset, highest first (ties in any order).
Resign(l) ==
    /\ alive[l]
    /\ state[l] = "Leader"
    /\ Room(Cardinality(Voters \ {l}))
    /\ \E succ \in Orderings(Voters \ {l}) :
          /\ \A i, j \in DOMAIN succ : i < j => endOffset[l][succ[i]] >= endOffset[l][succ[j]]
          /\ messages' = AddAll(messages,
                {[type |-> "EndQuorumEpochRequest", src |-> l, dst |-> t, epoch |-> currentEpoch[l],
                  successors |-> succ] : t \in Voters \ {l}})
    /\ state' = [state EXCEPT ![l] = "Resigned"]
    /\ endOffset' = [endOffset EXCEPT ![l] = NoOffsets]
    /\ endorsed' = [endorsed EXCEPT ![l] = {}]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, alive, logVars, votesGranted, ghostVars>>

\* Rejected for an older epoch or an unknown/other leader of this epoch.  The first preferred
\* successor starts an election at once; the others only learn the epoch and wait out a
\* back-off, which in this untimed model is the nondeterminism of ElectionTimeout.
HandleEndQuorumEpochRequest(m) ==
    LET s == m.dst
        l == m.src
        newer == m.epoch > currentEpoch[s]
        accept == newer \/ (m.epoch = currentEpoch[s] /\ leader[s] = l)
        first == m.successors[1] = s /\ m.epoch < MaxEpoch
                 /\ BagSize(messages) - 1 + Cardinality(Voters) - 1 <= MaxMessages
    IN
    /\ m.type = "EndQuorumEpochRequest"
    /\ alive[s]
    /\ IF accept /\ first
       THEN /\ state' = [state EXCEPT ![s] = "Candidate"]
            /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch + 1]
            /\ votedFor' = [votedFor EXCEPT ![s] = s]
            /\ leader' = [leader EXCEPT ![s] = Nil]
            /\ votesGranted' = [votesGranted EXCEPT ![s] = {s}]
            /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
            /\ endorsed' = [endorsed EXCEPT ![s] = {}]
            /\ messages' = AddAll(Remove(messages, m), VoteRequests(s, m.epoch + 1))
       ELSE /\ IF accept /\ newer
               THEN /\ state' = [state EXCEPT ![s] = "Follower"]
                    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
                    /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
                    /\ leader' = [leader EXCEPT ![s] = l]
                    /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
                    /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
                    /\ endorsed' = [endorsed EXCEPT ![s] = {}]
               ELSE UNCHANGED <<state, currentEpoch, votedFor, leader, leaderVars>>
            /\ Discard(m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

-----------------------------------------------------------------------------
(* Replication *)

ClientAppend(l, v) ==
    /\ alive[l]
    /\ state[l] = "Leader"
    /\ Len(log[l]) < MaxLogLen
    /\ log' = [log EXCEPT ![l] = Append(@, [epoch |-> currentEpoch[l], value |-> v])]
    /\ UNCHANGED <<serverVars, highWatermark, leaderVars, messages, ghostVars>>

\* A voter fetches from its leader; an observer from its leader if known, else from any voter
\* (bootstrap).  One fetch in flight per replica, as Kafka keeps one request per connection.
SendFetchRequest(s) ==
    /\ alive[s]
    /\ \/ s \in Voters /\ state[s] = "Follower"
       \/ s \in Observers
    /\ ~\E m \in DOMAIN messages :
          \/ m.type = "FetchRequest" /\ m.src = s
          \/ m.type = "FetchResponse" /\ m.dst = s
    /\ Room(1)
    /\ \E d \in (IF leader[s] # Nil THEN {leader[s]} ELSE Voters) \ {s} :
          messages' = Add(messages,
             [type |-> "FetchRequest", src |-> s, dst |-> d, epoch |-> currentEpoch[s],
              fetchOffset |-> Len(log[s]), lastFetchedEpoch |-> LastEpoch(log[s])])
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

\* The leader checks (fetch offset, last fetched epoch) against its log: on a match it
\* records the follower's end offset and sends records (any non-empty prefix of what follows,
\* as a size limit would) with its HWM; otherwise it answers with the largest epoch <= the
\* fetch epoch and that epoch's end offset.  A non-leader answers with what it knows.
HandleFetchRequest(m) ==
    LET l == m.dst
        f == m.src
        divEnd == EndOffsetForEpoch(log[l], m.lastFetchedEpoch)
        divEpoch == EpochAt(log[l], divEnd)
        valid == divEpoch = m.lastFetchedEpoch /\ divEnd >= m.fetchOffset
        remaining == Len(log[l]) - m.fetchOffset
    IN
    /\ m.type = "FetchRequest"
    /\ alive[l]
    /\ IF state[l] # "Leader" \/ m.epoch # currentEpoch[l]
       THEN /\ Reply(FetchResponse(l, f, currentEpoch[l], leader[l], "error", m, <<>>,
                                  UnknownHwm, 0, 0), m)
            /\ UNCHANGED leaderVars
       ELSE IF valid
       THEN /\ \E k \in (IF remaining = 0 THEN {0} ELSE 1..remaining) :
                  Reply(FetchResponse(l, f, currentEpoch[l], l, "ok", m,
                          SubSeq(log[l], m.fetchOffset + 1, m.fetchOffset + k),
                          LeaderHwm(l), 0, 0), m)
            /\ endOffset' = [endOffset EXCEPT ![l][f] = m.fetchOffset]
            /\ endorsed' = [endorsed EXCEPT ![l] = IF f \in Voters THEN @ \cup {f} ELSE @]
            /\ UNCHANGED votesGranted
       ELSE /\ Reply(FetchResponse(l, f, currentEpoch[l], l, "diverging", m, <<>>,
                                   LeaderHwm(l), divEpoch, divEnd), m)
            /\ UNCHANGED leaderVars
    /\ UNCHANGED <<serverVars, logVars, ghostVars>>

\* The follower adopts a newer epoch/leader; otherwise, if the response answers the fetch it
\* would send now, it truncates to the diverging offset or appends and moves its HWM.
HandleFetchResponse(m) ==
    LET f == m.dst
        current == /\ m.epoch = currentEpoch[f]
                   /\ state[f] = "Follower" /\ leader[f] = m.src
                   /\ m.fetchOffset = Len(log[f]) /\ m.lastFetchedEpoch = LastEpoch(log[f])
        truncTo == Min(m.divEnd, EndOffsetForEpoch(log[f], m.divEpoch))
    IN
    /\ m.type = "FetchResponse"
    /\ alive[f]
    /\ CASE m.epoch > currentEpoch[f] ->
              /\ state' = [state EXCEPT ![f] = IF m.leader # Nil THEN "Follower" ELSE "Unattached"]
              /\ currentEpoch' = [currentEpoch EXCEPT ![f] = m.epoch]
              /\ votedFor' = [votedFor EXCEPT ![f] = Nil]
              /\ leader' = [leader EXCEPT ![f] = m.leader]
              /\ endOffset' = [endOffset EXCEPT ![f] = NoOffsets]
              /\ votesGranted' = [votesGranted EXCEPT ![f] = {}]
              /\ endorsed' = [endorsed EXCEPT ![f] = {}]
              /\ UNCHANGED <<logVars, committed>>
         [] m.epoch = currentEpoch[f] /\ leader[f] = Nil /\ m.leader \notin {Nil, f} ->
              /\ state' = [state EXCEPT ![f] = "Follower"]
              /\ leader' = [leader EXCEPT ![f] = m.leader]
              /\ votesGranted' = [votesGranted EXCEPT ![f] = {}]
              /\ UNCHANGED <<currentEpoch, votedFor, endOffset, endorsed, logVars, committed>>
         [] current /\ m.kind = "ok" ->
              LET log1 == log[f] \o m.entries
                  hwm1 == Max(highWatermark[f], Min(m.hwm, Len(log1)))
              IN
              /\ log' = [log EXCEPT ![f] = log1]
              /\ highWatermark' = [highWatermark EXCEPT ![f] = hwm1]
              /\ Commit(log1, hwm1, currentEpoch[f])
              /\ UNCHANGED <<state, currentEpoch, votedFor, leader, leaderVars>>
         [] current /\ m.kind = "diverging" ->
              /\ log' = [log EXCEPT ![f] = SubSeq(@, 1, truncTo)]
              /\ UNCHANGED <<state, currentEpoch, votedFor, leader, leaderVars, highWatermark,
                             committed>>
         [] OTHER -> UNCHANGED <<state, currentEpoch, votedFor, leader, leaderVars, logVars,
                                 committed>>
    /\ Discard(m)
    /\ UNCHANGED <<alive, restarts, elected>>

\* The largest offset that a majority of voters (the leader by its own log end) has reached.
MajorityOffset(l) ==
    LET reached(n) == {v \in Voters :
                          IF v = l THEN Len(log[l]) >= n ELSE endOffset[l][v] >= n}
    IN CHOOSE n \in 0..Len(log[l]) :
          /\ IsMajority(reached(n))
          /\ \A n2 \in (n + 1)..Len(log[l]) : ~IsMajority(reached(n2))

\* KIP-595: the HWM only moves to an offset past the start of the leader's epoch, i.e. whose
\* record carries the leader's epoch (the LeaderChange record makes that quick).
HwmEpochOk(l, n) == Mutant = "HwmNoEpochCheck" \/ log[l][n].epoch = currentEpoch[l]

AdvanceHighWatermark(l) ==
    LET n == MajorityOffset(l) IN
    /\ alive[l]
    /\ state[l] = "Leader"
    /\ n > highWatermark[l]
    /\ HwmEpochOk(l, n)
    /\ highWatermark' = [highWatermark EXCEPT ![l] = n]
    /\ Commit(log[l], n, currentEpoch[l])
    /\ UNCHANGED <<serverVars, log, leaderVars, messages, restarts, elected>>

-----------------------------------------------------------------------------
(* Failures *)

Crash(s) ==
    /\ alive[s]
    /\ restarts < MaxRestarts
    /\ alive' = [alive EXCEPT ![s] = FALSE]
    /\ restarts' = restarts + 1
    /\ UNCHANGED <<state, currentEpoch, votedFor, leader, logVars, leaderVars, messages,
                   elected, committed>>

\* The role follows from the persisted quorum-state: a leader comes back Resigned in its
\* epoch, a candidate as candidate of its epoch (asking for votes again), a replica that knows
\* the leader as follower.  HWM and all in-memory bookkeeping are lost.
Restart(s) ==
    LET vf == IF Mutant = "VotedForNotPersisted" THEN Nil ELSE votedFor[s]
        st == RestartState(s, vf)
    IN
    /\ ~alive[s]
    /\ alive' = [alive EXCEPT ![s] = TRUE]
    /\ state' = [state EXCEPT ![s] = st]
    /\ votedFor' = [votedFor EXCEPT ![s] = vf]
    /\ highWatermark' = [highWatermark EXCEPT ![s] = 0]
    /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
    /\ votesGranted' = [votesGranted EXCEPT ![s] = IF st = "Candidate" THEN {s} ELSE {}]
    /\ endorsed' = [endorsed EXCEPT ![s] = {}]
    /\ IF st = "Candidate"
       THEN /\ Room(Cardinality(Voters) - 1)
            /\ messages' = AddAll(messages, VoteRequests(s, currentEpoch[s]))
       ELSE UNCHANGED messages
    /\ UNCHANGED <<currentEpoch, leader, log, ghostVars>>

DropMessage(m) ==
    /\ Discard(m)
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

\* Any message but a Fetch request: Kafka keeps one Fetch in flight per connection and matches
\* the answer to it, so a leader never answers one fetch twice to a follower that sees both
\* (the model would then deliver two answers of one fetch with different HWMs).  A duplicated
\* Fetch *response* (a stale answer arriving again) stays in the model.
DuplicateMessage(m) ==
    /\ m.type # "FetchRequest"
    /\ messages[m] = 1
    /\ Room(1)
    /\ messages' = Add(messages, m)
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

-----------------------------------------------------------------------------
(* Specification *)

\* Models that leave out a fault override its action with this in their config
\* (e.g. `DuplicateMessage <- NoFault`), which keeps one spec for all models.
NoFault(m) == FALSE

Next ==
    \/ \E s \in Server : ElectionTimeout(s)
    \/ \E s \in Server : BecomeLeader(s)
    \/ \E s \in Server : Resign(s)
    \/ \E s \in Server, v \in Values : ClientAppend(s, v)
    \/ \E s \in Server : SendFetchRequest(s)
    \/ \E s \in Server : AdvanceHighWatermark(s)
    \/ \E s \in Server : Crash(s)
    \/ \E s \in Server : Restart(s)
    \/ \E m \in DOMAIN messages : HandleVoteRequest(m)
    \/ \E m \in DOMAIN messages : HandleVoteResponse(m)
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochRequest(m)
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochResponse(m)
    \/ \E m \in DOMAIN messages : HandleEndQuorumEpochRequest(m)
    \/ \E m \in DOMAIN messages : HandleFetchRequest(m)
    \/ \E m \in DOMAIN messages : HandleFetchResponse(m)
    \/ \E m \in DOMAIN messages : DropMessage(m)
    \/ \E m \in DOMAIN messages : DuplicateMessage(m)

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Safety *)

Entry == [epoch : 0..MaxEpoch, value : Values \cup {LC}]

TypeOK ==
    /\ state \in [Server -> States]
    /\ currentEpoch \in [Server -> 0..MaxEpoch]
    /\ votedFor \in [Server -> Server \cup {Nil}]
    /\ leader \in [Server -> Server \cup {Nil}]
    /\ \A s \in Server : log[s] \in Seq(Entry)
    /\ \A s \in Server : highWatermark[s] \in 0..Len(log[s])
    /\ alive \in [Server -> BOOLEAN]
    /\ endOffset \in [Server -> [Server -> Nat]]
    /\ votesGranted \in [Server -> SUBSET Voters]
    /\ endorsed \in [Server -> SUBSET Voters]
    /\ \A m \in DOMAIN messages : messages[m] \in Nat \ {0}
    /\ restarts \in 0..MaxRestarts

\* At most one leader per epoch.
ElectionSafety == \A a, b \in elected : a[1] = b[1] => a[2] = b[2]

\* Two logs with a record of the same epoch at the same offset agree up to that offset.
LogMatching ==
    \A s, t \in Server : \A i \in 1..Min(Len(log[s]), Len(log[t])) :
        log[s][i].epoch = log[t][i].epoch => SubSeq(log[s], 1, i) = SubSeq(log[t], 1, i)

Holds(s, c) == Len(log[s]) >= c[1] /\ log[s][c[1]] = c[2]

\* A leader's log holds every record committed in an earlier epoch.
LeaderCompleteness ==
    \A l \in Server : state[l] = "Leader" =>
        \A c \in committed : c[3] < currentEpoch[l] => Holds(l, c)

\* A committed record stays, at its offset, on a majority of voters and in the log of every
\* leader of its commit epoch or later.
CommittedNeverLost ==
    \A c \in committed :
        /\ IsMajority({v \in Voters : Holds(v, c)})
        /\ \A l \in Server : state[l] = "Leader" /\ currentEpoch[l] >= c[3] => Holds(l, c)

\* Every record below a leader's HWM is held by a majority of voters.
MajorityReachedHighWatermark ==
    \A l \in Server : state[l] = "Leader" =>
        IsMajority({v \in Voters :
            /\ Len(log[v]) >= highWatermark[l]
            /\ SubSeq(log[v], 1, highWatermark[l]) = SubSeq(log[l], 1, highWatermark[l])})

\* No replica receives, from the leader of its current epoch, a known HWM below the one it
\* holds (Kafka's follower refuses such an update as a non-monotonic HWM).  Messages in flight
\* are part of the state, so this is checked on every response a replica may still receive.
FetchedHighWatermarkMonotonic ==
    \A r \in DOMAIN messages :
        (/\ r.type = "FetchResponse" /\ r.kind # "error" /\ r.hwm # UnknownHwm
         /\ alive[r.dst] /\ r.epoch = currentEpoch[r.dst])
            => r.hwm >= highWatermark[r.dst]

\* Action properties (checked as PROPERTIES).
EpochMonotonic == [][\A s \in Server : currentEpoch'[s] >= currentEpoch[s]]_vars

\* The HWM a running server exposes never decreases (it restarts from 0 after a crash).
HighWatermarkMonotonic ==
    [][\A s \in Server : alive[s] /\ alive'[s] => highWatermark'[s] >= highWatermark[s]]_vars

-----------------------------------------------------------------------------
(* Liveness: no faults, and timeouts only while no election is under way (the effect of
   randomised election timeouts) *)

Quiet == \A t \in Server : state[t] \notin {"Candidate", "Leader"}

LiveElectionTimeout(s) == Quiet /\ ElectionTimeout(s)

LiveNext ==
    \/ \E s \in Server : LiveElectionTimeout(s)
    \/ \E s \in Server : BecomeLeader(s)
    \/ \E s \in Server, v \in Values : ClientAppend(s, v)
    \/ \E s \in Server : SendFetchRequest(s)
    \/ \E s \in Server : AdvanceHighWatermark(s)
    \/ \E m \in DOMAIN messages : HandleVoteRequest(m)
    \/ \E m \in DOMAIN messages : HandleVoteResponse(m)
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochRequest(m)
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochResponse(m)
    \/ \E m \in DOMAIN messages : HandleFetchRequest(m)
    \/ \E m \in DOMAIN messages : HandleFetchResponse(m)

LiveSpec ==
    /\ Init /\ [][LiveNext]_vars
    /\ \A s \in Server : WF_vars(LiveElectionTimeout(s)) /\ WF_vars(BecomeLeader(s))
    /\ WF_vars(\E m \in DOMAIN messages : HandleVoteRequest(m))
    /\ WF_vars(\E m \in DOMAIN messages : HandleVoteResponse(m))

EventuallyLeaderElected == <>(\E s \in Server : state[s] = "Leader")

\* State identity without `endorsed`, which no guard or invariant reads (a smaller search).
ModelView == <<state, currentEpoch, votedFor, leader, log, highWatermark, alive, endOffset,
               votesGranted, messages, restarts, elected, committed>>

\* Symmetry: voters among themselves, observers among themselves, and values.
Symmetry == Permutations(Voters) \cup Permutations(Observers) \cup Permutations(Values)
=============================================================================
