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
(* Snapshots (KIP-630): a replica snapshots a committed prefix of its log *)
(* (CreateSnapshot), moves its log start up to a snapshot it holds        *)
(* (AdvanceLogStartOffset); a leader answers a Fetch it cannot serve from *)
(* its log with its latest snapshot's id, and the follower fetches that   *)
(* snapshot by chunk positions (SendFetchSnapshotRequest,                 *)
(* HandleFetchSnapshotRequest/Response) and installs it (InstallSnapshot).*)
(* MaxSnapshots = 0 disables all of it: no snapshot is ever taken.        *)
(*                                                                         *)
(* Voter changes (KIP-853 as Apache Kafka ships it, KIP-856's rules), with *)
(* Dynamic = TRUE (kraft.version 1): the voter set of a replica is the one *)
(* of the last Voters record of its history (snapshot and log), else the   *)
(* bootstrap set `Voters`; the first leader writes that set into the log   *)
(* (BecomeLeader appends LeaderChange, KRaftVersion and Voters records).   *)
(* A change takes effect when appended and is undone when truncated.      *)
(* AddVoter / RemoveVoter (VoterChanges = TRUE): one uncommitted change at *)
(* a time, only once the LeaderChange record of the leader's epoch is      *)
(* committed; a leader outside its voter set does not count itself for the *)
(* HWM and resigns (Resign).  Replicas are ids: the directory ids of       *)
(* KIP-853 and disk loss are KRaftReconfig.tla's.  Dynamic = FALSE (and    *)
(* VoterChanges = FALSE) is the static quorum of kraft.version 0.          *)
(*                                                                         *)
(* Action names are the trace event names of the implementation.          *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
    Server,       \* all replicas
    Voters,       \* the static voter set, or the bootstrap voter set when Dynamic
    Values,       \* client values a leader may append
    MaxEpoch,     \* no election beyond this epoch
    MaxLogLen,    \* ClientAppend only while the leader's log is shorter
    MaxMessages,  \* a send is enabled only while the bag holds fewer messages
    MaxRestarts,  \* total number of crashes
    MaxSnapshots, \* CreateSnapshot only while a replica holds fewer (0: no snapshots)
    Dynamic,      \* kraft.version 1: the voter set is the log's (FALSE: static voters)
    VoterChanges, \* AddVoter / RemoveVoter enabled (needs Dynamic; bounded by MaxLogLen)
    Nil,          \* "none" for votedFor / leader
    Mutant        \* "none" in every real model; see spec/mutants/

ASSUME /\ Voters \subseteq Server /\ Voters # {}
       /\ Nil \notin Server
       /\ MaxEpoch \in Nat /\ MaxLogLen \in Nat /\ MaxMessages \in Nat /\ MaxRestarts \in Nat
       /\ MaxSnapshots \in Nat
       /\ Dynamic \in BOOLEAN /\ VoterChanges \in BOOLEAN /\ (VoterChanges => Dynamic)
       /\ Mutant \in {"none", "HwmNoEpochCheck", "VotedForNotPersisted", "LeaderKeepsStaleHwm",
                      "SnapshotBeyondHwm", "EarlyVoterChange", "TwoUncommittedChanges",
                      "RemovedLeaderCountsItself"}

Observers == Server \ Voters

States == {"Unattached", "Voted", "Prospective", "Candidate", "Leader", "Follower", "Resigned"}

\* The value of the LeaderChange control record a new leader appends first.
LC == "LC"
\* The values of the KRaftVersion and Voters control records (a Voters record also carries
\* the field `voters`: the whole voter set).
KV == "KRaftVersion"
VR == "Voters"

VARIABLES
    state,          \* role of each server
    currentEpoch,   \* persisted (quorum-state)
    votedFor,       \* persisted (quorum-state)
    leader,         \* persisted (quorum-state): the known leader of currentEpoch, or Nil
    log,            \* persisted: sequence of [epoch, value]
    highWatermark,  \* volatile: records 1..highWatermark are committed
    alive,          \* FALSE while crashed
    endOffset,      \* leader: endOffset[l][f] = fetch offset last validated for f
    votesGranted,   \* prospective/candidate: voters that granted the (pre-)vote of this round
    votesRejected,  \* prospective: voters that rejected its pre-vote (read only in Prospective)
    fetched,        \* follower: a Fetch of this epoch was answered by its leader since it
                    \* became Follower (Kafka's hasFetchedFromLeader; FALSE otherwise)
    atStart,        \* volatile: the only voter of its voter set (re)started and has not
                    \* stood yet (Kafka's KafkaRaftClient.initialize; FALSE otherwise)
    endorsed,       \* leader: voters that acknowledged this epoch (BeginQuorumEpoch / Fetch)
    messages,       \* the network: message -> number of copies
    logStart,       \* persisted: records 1..logStart are held only in the snapshot ending there
    snapshots,      \* persisted: ids <<end offset, epoch>> of the snapshots a replica holds
    snapFetch,      \* volatile: the snapshot a follower is fetching (NoSnapFetch: none)
    restarts,       \* crashes so far
    elected,        \* history: <<epoch, server>> of every BecomeLeader
    committed       \* history: <<offset, record, epoch>> of every record exposed by a HWM,
                    \* with the epoch in which it was first exposed

serverVars == <<state, currentEpoch, votedFor, leader, alive>>
logVars == <<log, highWatermark>>
leaderVars == <<endOffset, votesGranted, votesRejected, endorsed>>
ghostVars == <<restarts, elected, committed>>
snapVars == <<logStart, snapshots>>
vars == <<serverVars, logVars, leaderVars, fetched, atStart, messages, ghostVars, snapVars,
         snapFetch>>

-----------------------------------------------------------------------------
(* Helpers *)

Min(a, b) == IF a < b THEN a ELSE b
Max(a, b) == IF a > b THEN a ELSE b

\* Voter sets (KIP-853): the last Voters record of a history, else the bootstrap set.
IsVotersRecord(r) == r.value = VR
LastVotersIdx(l) ==
    LET I == {i \in 1..Len(l) : IsVotersRecord(l[i])}
    IN IF I = {} THEN 0 ELSE CHOOSE i \in I : \A j \in I : j <= i
VotersIn(l) == IF LastVotersIdx(l) = 0 THEN Voters ELSE l[LastVotersIdx(l)].voters
VotersOf(s) == IF Dynamic THEN VotersIn(log[s]) ELSE Voters

IsMajorityOf(S, V) == 2 * Cardinality(S \cap V) > Cardinality(V)
IsMajority(S) == IsMajorityOf(S, Voters)

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

\* A Candidate's vote requests carry its new epoch; a Prospective's pre-vote requests
\* (KIP-996) carry its current epoch, unchanged.
VoteRequests(c, e, pre) ==
    {[type |-> "VoteRequest", src |-> c, dst |-> t, epoch |-> e, preVote |-> pre,
      lastEpoch |-> LastEpoch(log[c]), endOffset |-> Len(log[c])] : t \in VotersOf(c) \ {c}}

\* The orderings of a set, for the preferred-successor list of EndQuorumEpoch.
Orderings(S) == {f \in [1..Cardinality(S) -> S] : \A i, j \in DOMAIN f : i # j => f[i] # f[j]}

\* The snapshot id of an answer that names none (Kafka's -1s).
NoSnapshot == <<-1, -1>>

FetchResponse(src, dst, e, ldr, kind, req, entries, hwm, divEpoch, divEnd) ==
    [type |-> "FetchResponse", src |-> src, dst |-> dst, epoch |-> e, leader |-> ldr,
     kind |-> kind, fetchOffset |-> req.fetchOffset, lastFetchedEpoch |-> req.lastFetchedEpoch,
     entries |-> entries, hwm |-> hwm, divEpoch |-> divEpoch, divEnd |-> divEnd,
     snapshot |-> NoSnapshot]

-----------------------------------------------------------------------------
(* Snapshot helpers (KIP-630).  log[s] stays the replica's whole history: records           *)
(* 1..logStart[s] are the content of the snapshot that ends at logStart[s] (Kafka keeps them *)
(* only there), the rest is the log.  A snapshot <<o, e>> holds records 1..o of that history; *)
(* its last record has epoch e.  So Len(log[s]) and LastEpoch(log[s]) are the latest of the  *)
(* snapshot and the log, which is what elections and Fetch compare (KIP-630).                 *)

\* The size of a snapshot in abstract bytes: a transfer is a sequence of chunks by position
\* over 0..size-1.  Trace validation substitutes the sizes the implementation logged.
SnapshotSize(s, id) == 2

\* Not fetching a snapshot.  A transfer: the snapshot, from which leader in which epoch, the
\* position of the next byte, the size (-1 until the first chunk), the content received.
NoSnapFetch == [snapshot |-> NoSnapshot, leader |-> Nil, epoch |-> 0, position |-> 0,
                size |-> -1, content |-> <<>>]

Fetching(s) == snapFetch[s] # NoSnapFetch

LatestSnapshot(s) == CHOOSE x \in snapshots[s] : \A y \in snapshots[s] : y[1] <= x[1]
EarliestSnapshot(s) == CHOOSE x \in snapshots[s] : \A y \in snapshots[s] : x[1] <= y[1]
LatestSnapshotEnd(s) == IF snapshots[s] = {} THEN 0 ELSE LatestSnapshot(s)[1]

\* Whether leader l answers a Fetch from (fo, fe) with its latest snapshot's id (Kafka: an
\* empty fetcher gets the latest snapshot; else ReplicatedLog.validateOffsetAndEpoch: below
\* the log start, at it with another epoch, or with an epoch older than every snapshot).
SnapshotForFetch(l, fo, fe) ==
    /\ snapshots[l] # {}
    /\ \/ fo = 0
       \/ fo < logStart[l]
       \/ fo = logStart[l] /\ fe # EarliestSnapshot(l)[2]
       \/ fe < EarliestSnapshot(l)[2]

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
    /\ votesRejected = [s \in Server |-> {}]
    /\ fetched = [s \in Server |-> FALSE]
    \* The first start is a start too (AtStartAfter); Unattached stands by ElectionTimeout anyway.
    /\ atStart = [s \in Server |-> Voters = {s}]
    /\ endorsed = [s \in Server |-> {}]
    /\ messages = <<>>
    /\ restarts = 0
    /\ elected = {}
    /\ committed = {}
    /\ logStart = [s \in Server |-> 0]
    /\ snapshots = [s \in Server |-> {}]
    /\ snapFetch = [s \in Server |-> NoSnapFetch]

-----------------------------------------------------------------------------
(* Election, with KIP-996 pre-vote as Apache Kafka 4.x ships it *)

\* Where a Prospective goes when its pre-vote fails (Kafka's transition after an election
\* loss): back to the leader it knew, else to its vote of this epoch, else Unattached.
LossState(s) ==
    IF leader[s] # Nil THEN "Follower" ELSE IF votedFor[s] # Nil THEN "Voted" ELSE "Unattached"

\* The election timer (a follower's fetch timer) of a voter runs out.  Unattached, Voted,
\* Follower and Candidate become Prospective in the SAME epoch, keeping their vote (a
\* Follower's is dropped, as Kafka stores none once it knows the leader) and known leader,
\* persisting nothing, and send pre-vote requests.  A Prospective that got no majority
\* in time goes back (LossState).  Resigned moves to Unattached in the next epoch (and times out
\* again into Prospective).  No pre-vote at MaxEpoch: it could not lead to a candidate.
\* The only voter of its voter set does not wait for its timer as it starts (atStart: Kafka's
\* KafkaRaftClient.initialize), and stands from Resigned too, in its epoch.
ElectionTimeout(s) ==
    /\ alive[s]
    \* A Resigned leader that removed itself moves on too (Kafka's pollResigned).
    /\ s \in VotersOf(s) \/ state[s] = "Resigned"
    /\ currentEpoch[s] < MaxEpoch
    /\ CASE \/ state[s] \in {"Unattached", "Voted", "Follower", "Candidate"}
            \/ state[s] = "Resigned" /\ atStart[s] ->
              /\ Room(Cardinality(VotersOf(s)) - 1)
              /\ state' = [state EXCEPT ![s] = "Prospective"]
              /\ votesGranted' = [votesGranted EXCEPT ![s] = {s}]
              /\ votesRejected' = [votesRejected EXCEPT ![s] = {}]
              /\ messages' = AddAll(messages, VoteRequests(s, currentEpoch[s], TRUE))
              \* Kafka keeps no vote once a leader is known (its quorum-state stores either):
              \* a Prospective that was a Follower knows the leader and no vote.
              /\ votedFor' = [votedFor EXCEPT ![s] = IF state[s] = "Follower" THEN Nil ELSE @]
              \* A Resigned at start forgets that it led (as the core; it is Candidate next) but
              \* keeps its vote for itself: it grants no other vote in the epoch it led.
              /\ leader' = [leader EXCEPT ![s] = IF state[s] = "Resigned" THEN Nil ELSE @]
              /\ UNCHANGED currentEpoch
         [] state[s] = "Prospective" ->
              /\ state' = [state EXCEPT ![s] = LossState(s)]
              /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
              /\ UNCHANGED <<currentEpoch, votedFor, leader, votesRejected, messages>>
         [] state[s] = "Resigned" /\ ~atStart[s] ->
              /\ state' = [state EXCEPT ![s] = "Unattached"]
              /\ currentEpoch' = [currentEpoch EXCEPT ![s] = @ + 1]
              /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
              /\ leader' = [leader EXCEPT ![s] = Nil]
              /\ UNCHANGED <<votesGranted, votesRejected, messages>>
         [] OTHER -> FALSE
    /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
    /\ endorsed' = [endorsed EXCEPT ![s] = {}]
    /\ UNCHANGED <<alive, logVars, ghostVars>>

\* A Prospective with a majority of pre-votes (its own counted) stands for election: epoch + 1,
\* votes for itself (persisted before the requests go out), asks every other voter.
BecomeCandidate(s) ==
    /\ alive[s]
    /\ state[s] = "Prospective"
    /\ IsMajorityOf(votesGranted[s], VotersOf(s))
    /\ currentEpoch[s] < MaxEpoch
    /\ Room(Cardinality(VotersOf(s)) - 1)
    /\ state' = [state EXCEPT ![s] = "Candidate"]
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = @ + 1]
    /\ votedFor' = [votedFor EXCEPT ![s] = s]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    \* A new tally (Kafka's CandidateState): a voter that refused the pre-vote may grant the vote.
    /\ votesGranted' = [votesGranted EXCEPT ![s] = {s}]
    /\ votesRejected' = [votesRejected EXCEPT ![s] = {}]
    /\ messages' = AddAll(messages, VoteRequests(s, currentEpoch[s] + 1, FALSE))
    /\ UNCHANGED <<alive, logVars, endOffset, endorsed, ghostVars>>

\* Kafka's handleVoteRequest, in order: an older epoch is rejected; a newer one (of a pre-vote
\* too: someone reached it) makes the receiver Unattached in it; the candidate and the receiver
\* must be voters; then the granting rule of the receiver's state (EpochState.canGrantVote):
\*   Unattached, Voted, Prospective: a pre-vote iff the candidate's log is up to date; a vote
\*     only to the replica already voted for, else not while a leader is known, else iff up to
\*     date;
\*   Follower: a pre-vote iff up to date and no Fetch was answered by its leader yet (a voter
\*     cut off from a live leader cannot disrupt it); never a vote;
\*   Candidate, Resigned: a pre-vote iff up to date; never a vote;   Leader: nothing.
\* A granted vote is persisted (Unattached -> Voted; a Prospective records it and restarts its
\* tally); a granted pre-vote changes nothing.
HandleVoteRequest(m) ==
    LET s == m.dst
        c == m.src
        pre == m.preVote
        newer == m.epoch > currentEpoch[s]
        epoch1 == IF newer THEN m.epoch ELSE currentEpoch[s]
        state1 == IF newer THEN "Unattached" ELSE state[s]
        voted1 == IF newer THEN Nil ELSE votedFor[s]
        leader1 == IF newer THEN Nil ELSE leader[s]
        upToDate == LogUpToDate(m.lastEpoch, m.endOffset, log[s])
        grant == /\ m.epoch = epoch1
                 \* KIP-853 (Kafka 4.x canGrantVote): in a dynamic quorum any replica may
                 \* grant; the candidate counts only its voters' grants.
                 /\ Dynamic \/ (c \in Voters /\ s \in Voters)
                 /\ CASE state1 \in {"Unattached", "Voted", "Prospective"} ->
                           IF pre THEN upToDate
                           ELSE IF voted1 # Nil THEN voted1 = c
                           ELSE leader1 = Nil /\ upToDate
                      [] state1 = "Follower" -> pre /\ upToDate /\ ~fetched[s]
                      [] state1 \in {"Candidate", "Resigned"} -> pre /\ upToDate
                      [] OTHER -> FALSE
        vote == grant /\ ~pre /\ voted1 = Nil
    IN
    /\ m.type = "VoteRequest"
    /\ alive[s]
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = epoch1]
    /\ votedFor' = [votedFor EXCEPT ![s] = IF vote THEN c ELSE voted1]
    /\ leader' = [leader EXCEPT ![s] = leader1]
    /\ state' = [state EXCEPT ![s] = IF vote /\ state1 = "Unattached" THEN "Voted" ELSE state1]
    /\ IF newer
       THEN /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
            /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
            /\ endorsed' = [endorsed EXCEPT ![s] = {}]
            /\ UNCHANGED votesRejected
       ELSE IF vote /\ state1 = "Prospective"
       THEN /\ votesGranted' = [votesGranted EXCEPT ![s] = {s}]
            /\ votesRejected' = [votesRejected EXCEPT ![s] = {}]
            /\ UNCHANGED <<endOffset, endorsed>>
       ELSE UNCHANGED leaderVars
    /\ Reply([type |-> "VoteResponse", src |-> s, dst |-> c, epoch |-> epoch1,
              granted |-> grant, preVote |-> pre], m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

\* A larger epoch makes the receiver Unattached in it.  A Prospective counts the answers to its
\* pre-vote: a grant, or a rejection; once a majority can no longer grant, it loses at once
\* (LossState).  A Candidate counts grants of its vote; rejections only stop its retries.
HandleVoteResponse(m) ==
    LET c == m.dst
        rejected1 == votesRejected[c] \cup {m.src}
        counts == /\ m.epoch = currentEpoch[c] /\ m.src \notin votesGranted[c] \cup votesRejected[c]
                  /\ m.src \in VotersOf(c)  \* the answer of a non-voter is not counted
    IN
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
            /\ UNCHANGED votesRejected
       ELSE /\ CASE state[c] = "Prospective" /\ m.preVote /\ counts /\ m.granted ->
                      /\ votesGranted' = [votesGranted EXCEPT ![c] = @ \cup {m.src}]
                      /\ UNCHANGED <<state, votesRejected>>
                 [] state[c] = "Prospective" /\ m.preVote /\ counts /\ ~m.granted ->
                      IF IsMajorityOf(VotersOf(c) \ rejected1, VotersOf(c))
                      THEN /\ votesRejected' = [votesRejected EXCEPT ![c] = rejected1]
                           /\ UNCHANGED <<state, votesGranted>>
                      ELSE /\ state' = [state EXCEPT ![c] = LossState(c)]
                           /\ votesGranted' = [votesGranted EXCEPT ![c] = {}]
                           /\ UNCHANGED votesRejected
                 [] state[c] = "Candidate" /\ ~m.preVote /\ counts /\ m.granted ->
                      /\ votesGranted' = [votesGranted EXCEPT ![c] = @ \cup {m.src}]
                      /\ UNCHANGED <<state, votesRejected>>
                 [] OTHER -> UNCHANGED <<state, votesGranted, votesRejected>>
            /\ UNCHANGED <<currentEpoch, votedFor, leader, endOffset, endorsed>>
    /\ Discard(m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

\* The records a new leader appends: the LeaderChange record of its epoch and, in a dynamic
\* quorum whose voter set no Voters record states yet (the bootstrap checkpoint's), the
\* KRaftVersion and Voters records that write it into the log (Kafka's
\* appendStartOfEpochControlRecords).
StartOfEpochRecords(c) ==
    LET e == currentEpoch[c] IN
    IF Dynamic /\ LastVotersIdx(log[c]) = 0
    THEN <<[epoch |-> e, value |-> LC], [epoch |-> e, value |-> KV],
           [epoch |-> e, value |-> VR, voters |-> Voters]>>
    ELSE <<[epoch |-> e, value |-> LC]>>

\* A candidate with a majority becomes leader, appends the LeaderChange record of its epoch
\* and announces itself with BeginQuorumEpoch.
BecomeLeader(c) ==
    /\ alive[c]
    /\ state[c] = "Candidate"
    /\ IsMajorityOf(votesGranted[c], VotersOf(c))
    /\ Room(Cardinality(VotersOf(c)) - 1)
    /\ state' = [state EXCEPT ![c] = "Leader"]
    /\ leader' = [leader EXCEPT ![c] = c]
    /\ log' = [log EXCEPT ![c] = @ \o StartOfEpochRecords(c)]
    /\ endOffset' = [endOffset EXCEPT ![c] = NoOffsets]
    /\ endorsed' = [endorsed EXCEPT ![c] = {c}]
    /\ elected' = elected \cup {<<currentEpoch[c], c>>}
    /\ messages' = AddAll(messages,
          {[type |-> "BeginQuorumEpochRequest", src |-> c, dst |-> t, epoch |-> currentEpoch[c]]
             : t \in VotersOf(c) \ {c}})
    /\ UNCHANGED <<currentEpoch, votedFor, alive, highWatermark, votesGranted, votesRejected,
                   restarts, committed>>

\* Accept if the epoch is newer, or the same epoch with no conflicting known leader.
HandleBeginQuorumEpochRequest(m) ==
    LET s == m.dst
        l == m.src
        newer == m.epoch > currentEpoch[s]
        accept == newer \/ (m.epoch = currentEpoch[s] /\ leader[s] \in {Nil, l})
        \* Kafka's maybeTransition: a replica that already knows this epoch's leader (a
        \* Follower, or a Prospective that came from following it) does not change state.
        known == ~newer /\ leader[s] = l
    IN
    /\ m.type = "BeginQuorumEpochRequest"
    /\ alive[s]
    /\ IF accept /\ ~known
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
    /\ UNCHANGED <<alive, logVars, votesRejected, ghostVars>>

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
    /\ UNCHANGED <<alive, logVars, votesRejected, ghostVars>>

\* Graceful resignation: EndQuorumEpoch to the other voters with the preferred successors
\* sorted by replicated offset, highest first (ties in any order).
Resign(l) ==
    /\ alive[l]
    /\ state[l] = "Leader"
    /\ Room(Cardinality(VotersOf(l) \ {l}))
    /\ \E succ \in Orderings(VotersOf(l) \ {l}) :
          /\ \A i, j \in DOMAIN succ : i < j => endOffset[l][succ[i]] >= endOffset[l][succ[j]]
          /\ messages' = AddAll(messages,
                {[type |-> "EndQuorumEpochRequest", src |-> l, dst |-> t, epoch |-> currentEpoch[l],
                  successors |-> succ] : t \in VotersOf(l) \ {l}})
    /\ state' = [state EXCEPT ![l] = "Resigned"]
    /\ endOffset' = [endOffset EXCEPT ![l] = NoOffsets]
    /\ endorsed' = [endorsed EXCEPT ![l] = {}]
    /\ UNCHANGED <<currentEpoch, votedFor, leader, alive, logVars, votesGranted, votesRejected,
                   ghostVars>>

\* Rejected for an older epoch or an unknown/other leader of this epoch.  A newer epoch makes
\* the receiver a Follower of the resigning leader.  Kafka 4.x then only shortens the
\* receiver's fetch timer (at once for the first preferred successor, after a back-off for the
\* others), so the election starts with its ElectionTimeout -> Prospective: in this untimed
\* model, the nondeterminism of ElectionTimeout.
HandleEndQuorumEpochRequest(m) ==
    LET s == m.dst
        l == m.src
        newer == m.epoch > currentEpoch[s]
    IN
    /\ m.type = "EndQuorumEpochRequest"
    /\ alive[s]
    /\ IF newer
       THEN /\ state' = [state EXCEPT ![s] = "Follower"]
            /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
            /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
            /\ leader' = [leader EXCEPT ![s] = l]
            /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
            /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
            /\ endorsed' = [endorsed EXCEPT ![s] = {}]
            /\ UNCHANGED votesRejected
       ELSE UNCHANGED <<state, currentEpoch, votedFor, leader, leaderVars>>
    /\ Discard(m)
    /\ UNCHANGED <<alive, logVars, ghostVars>>

-----------------------------------------------------------------------------
(* Replication *)

\* Who fetches: a voter as Follower; a replica outside its voter set (an observer, a removed
\* voter) unless it leads or stands, from its leader or, to find it, any voter.
FetchesNow(s) ==
    IF s \in VotersOf(s) THEN state[s] = "Follower"
    ELSE state[s] \in {"Unattached", "Voted", "Follower"}

ClientAppend(l, v) ==
    /\ alive[l]
    /\ state[l] = "Leader"
    /\ Len(log[l]) < MaxLogLen
    /\ log' = [log EXCEPT ![l] = Append(@, [epoch |-> currentEpoch[l], value |-> v])]
    /\ UNCHANGED <<serverVars, highWatermark, leaderVars, messages, ghostVars>>

\* A voter fetches from its leader.  An observer fetches from its leader if it knows one, and
\* from any voter to find one (bootstrap) or when its leader went silent: Kafka's observer
\* whose fetch timeout expired stays the Follower of its epoch's leader and asks the bootstrap
\* voters, never forgetting the leader within the epoch (this untimed model lets it ask them
\* any time).  One fetch in flight per replica, as Kafka keeps one request per connection.
\* Fetch pauses while a snapshot is fetched.
SendFetchRequest(s) ==
    /\ alive[s]
    /\ FetchesNow(s)
    /\ ~Fetching(s)
    /\ ~\E m \in DOMAIN messages :
          \/ m.type = "FetchRequest" /\ m.src = s
          \/ m.type = "FetchResponse" /\ m.dst = s
    /\ Room(1)
    /\ \E d \in (IF s \in VotersOf(s) THEN {leader[s]}
                 ELSE VotersOf(s) \cup (IF leader[s] # Nil THEN {leader[s]} ELSE {})) \ {s} :
          messages' = Add(messages,
             [type |-> "FetchRequest", src |-> s, dst |-> d, epoch |-> currentEpoch[s],
              fetchOffset |-> Len(log[s]), lastFetchedEpoch |-> LastEpoch(log[s])])
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

\* The leader checks (fetch offset, last fetched epoch) against its log: on a match it
\* records the follower's end offset and sends records (any non-empty prefix of what follows,
\* as a size limit would) with its HWM; otherwise it answers with the largest epoch <= the
\* fetch epoch and that epoch's end offset.  A non-leader answers with what it knows.  A fetch
\* the log cannot serve (SnapshotForFetch) is answered with the latest snapshot's id.
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
       ELSE IF SnapshotForFetch(l, m.fetchOffset, m.lastFetchedEpoch)
       THEN /\ Reply([FetchResponse(l, f, currentEpoch[l], l, "snapshot", m, <<>>, LeaderHwm(l),
                                    0, 0) EXCEPT !.snapshot = LatestSnapshot(l)], m)
            /\ UNCHANGED leaderVars
       ELSE IF valid
       THEN /\ \E k \in (IF remaining = 0 THEN {0} ELSE 1..remaining) :
                  Reply(FetchResponse(l, f, currentEpoch[l], l, "ok", m,
                          SubSeq(log[l], m.fetchOffset + 1, m.fetchOffset + k),
                          LeaderHwm(l), 0, 0), m)
            /\ endOffset' = [endOffset EXCEPT ![l][f] = m.fetchOffset]
            /\ endorsed' = [endorsed EXCEPT ![l] = IF f \in VotersOf(l) THEN @ \cup {f} ELSE @]
            /\ UNCHANGED votesGranted
       ELSE /\ Reply(FetchResponse(l, f, currentEpoch[l], l, "diverging", m, <<>>,
                                   LeaderHwm(l), divEpoch, divEnd), m)
            /\ UNCHANGED leaderVars
    /\ UNCHANGED <<serverVars, logVars, votesRejected, ghostVars>>

\* The follower adopts a newer epoch/leader; otherwise, if the response answers the fetch it
\* would send now, it truncates to the diverging offset or appends and moves its HWM.
HandleFetchResponse(m) ==
    LET f == m.dst
        current == /\ m.epoch = currentEpoch[f]
                   /\ state[f] = "Follower" /\ leader[f] = m.src
                   /\ m.fetchOffset = Len(log[f]) /\ m.lastFetchedEpoch = LastEpoch(log[f])
                   /\ ~Fetching(f)  \* Fetch is paused while a snapshot is fetched
        \* Never below the log start: what lies there is a snapshot's, committed.
        truncTo == Max(logStart[f], Min(m.divEnd, EndOffsetForEpoch(log[f], m.divEpoch)))
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
         \* kind "snapshot": the transfer starts (SnapFetchAfter); nothing else changes.
         [] OTHER -> UNCHANGED <<state, currentEpoch, votedFor, leader, leaderVars, logVars,
                                 committed>>
    /\ Discard(m)
    /\ UNCHANGED <<alive, votesRejected, restarts, elected>>

\* The largest offset that a majority of the leader's voters (the leader by its own log end,
\* and only if it is one of them: a removed leader does not count itself) has reached.
MajorityOffset(l) ==
    LET V == VotersOf(l)
        reached(n) == {v \in V : IF v = l THEN Len(log[l]) >= n ELSE endOffset[l][v] >= n}
        extra == IF Mutant = "RemovedLeaderCountsItself" /\ l \notin V THEN 1 ELSE 0
        enough(n) == 2 * (Cardinality(reached(n)) + extra) > Cardinality(V)
    IN CHOOSE n \in 0..Len(log[l]) :
          /\ enough(n)
          /\ \A n2 \in (n + 1)..Len(log[l]) : ~enough(n2)

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
(* Voter changes (KIP-853 / KIP-856) *)

\* A leader changes its voter set only when no change is in flight (its last Voters record is
\* committed: the TwoUncommittedChanges mutant does not wait) and once the LeaderChange
\* record of its epoch is committed, i.e. its HWM is known (Kafka: no change before the
\* leader's high watermark is known; the single-server-change bug of Ongaro, raft-dev 2015,
\* without it: the EarlyVoterChange mutant).  Voters records count toward MaxLogLen.
CanChangeVoters(l) ==
    /\ VoterChanges
    /\ alive[l]
    /\ state[l] = "Leader"
    /\ Len(log[l]) < MaxLogLen
    /\ Mutant = "TwoUncommittedChanges" \/ LastVotersIdx(log[l]) <= highWatermark[l]
    /\ Mutant = "EarlyVoterChange" \/ HwmKnown(l)

\* AddRaftVoter: replica s (not a voter by id) joins; the leader appends the new set.  Kafka
\* also waits for s to be caught up (availability only: not modelled).
AddVoter(l, s) ==
    /\ CanChangeVoters(l)
    /\ s \notin VotersOf(l)
    /\ log' = [log EXCEPT ![l] = Append(@, [epoch |-> currentEpoch[l], value |-> VR,
                                            voters |-> VotersOf(l) \cup {s}])]
    /\ UNCHANGED <<serverVars, highWatermark, leaderVars, messages, ghostVars>>

\* RemoveRaftVoter: voter v leaves (never the last one); v may be the leader itself, which
\* then leads without counting itself until it resigns.
RemoveVoter(l, v) ==
    /\ CanChangeVoters(l)
    /\ v \in VotersOf(l)
    /\ Cardinality(VotersOf(l)) > 1
    /\ log' = [log EXCEPT ![l] = Append(@, [epoch |-> currentEpoch[l], value |-> VR,
                                            voters |-> VotersOf(l) \ {v}])]
    /\ UNCHANGED <<serverVars, highWatermark, leaderVars, messages, ghostVars>>

-----------------------------------------------------------------------------
(* Snapshots (KIP-630) *)

\* The state machine snapshots what it applied: only a committed prefix (never past the
\* replica's HWM; the SnapshotBeyondHwm mutant snapshots up to its log end), after its latest
\* snapshot and its log start (Kafka's createNewSnapshot).  The replica holds the snapshot once
\* it is durable (the implementation's SnapshotWritten).
CreateSnapshot(s, o) ==
    /\ alive[s]
    /\ Cardinality(snapshots[s]) < MaxSnapshots
    /\ o > LatestSnapshotEnd(s) /\ o > logStart[s]
    /\ o <= IF Mutant = "SnapshotBeyondHwm" THEN Len(log[s]) ELSE highWatermark[s]
    /\ snapshots' = [snapshots EXCEPT ![s] = @ \cup {<<o, log[s][o].epoch>>}]
    /\ UNCHANGED <<serverVars, logVars, leaderVars, messages, ghostVars, logStart, snapFetch>>

\* The log start moves up to a snapshot the replica holds; records and older snapshots below
\* it are gone.  Kafka's rule of when (a leader: every live replica has it, or the log start
\* is older than metadata.start.offset.lag.time.max.ms; a follower: at or below the leader's
\* log start) decides only when a follower must fetch a snapshot; the untimed model allows it
\* at any time, to any snapshot held, for a leader or a follower.
AdvanceLogStartOffset(s) ==
    /\ alive[s]
    /\ state[s] \in {"Leader", "Follower"}
    /\ \E snap \in snapshots[s] :
          /\ snap[1] > logStart[s]
          /\ logStart' = [logStart EXCEPT ![s] = snap[1]]
          /\ snapshots' = [snapshots EXCEPT ![s] = {x \in @ : x[1] >= snap[1]}]
    /\ UNCHANGED <<serverVars, logVars, leaderVars, messages, ghostVars, snapFetch>>

\* A follower fetching a snapshot asks its leader for the bytes from its position; one request
\* in flight, none once every byte arrived (waiting to install).
SendFetchSnapshotRequest(s) ==
    LET t == snapFetch[s] IN
    /\ alive[s]
    /\ state[s] = "Follower"
    /\ Fetching(s)
    /\ t.position < t.size \/ t.size < 0
    /\ ~\E m \in DOMAIN messages :
          \/ m.type = "FetchSnapshotRequest" /\ m.src = s
          \/ m.type = "FetchSnapshotResponse" /\ m.dst = s
    /\ Room(1)
    /\ messages' = Add(messages,
          [type |-> "FetchSnapshotRequest", src |-> s, dst |-> t.leader, epoch |-> currentEpoch[s],
           snapshot |-> t.snapshot, position |-> t.position])
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars, snapVars, snapFetch>>

FetchSnapshotResponse(m, src, e, ldr, kind, snap, size, len, content) ==
    [type |-> "FetchSnapshotResponse", src |-> src, dst |-> m.src, epoch |-> e, leader |-> ldr,
     kind |-> kind, snapshot |-> snap, position |-> IF kind = "ok" THEN m.position ELSE 0,
     size |-> size, len |-> len, content |-> content]

\* The leader serves a chunk of a snapshot it holds from the asked position: any non-empty
\* part of the rest (a size limit).  Errors in Kafka's order: the epoch (fenced, unknown, not
\* the leader: kind "error"), the snapshot ("notFound"), the position ("outOfRange").  A chunk
\* carries the snapshot's content: the records it holds (the implementation's bytes).
HandleFetchSnapshotRequest(m) ==
    LET l == m.dst
        size == SnapshotSize(l, m.snapshot)
    IN
    /\ m.type = "FetchSnapshotRequest"
    /\ alive[l]
    /\ IF state[l] # "Leader" \/ m.epoch # currentEpoch[l]
       THEN Reply(FetchSnapshotResponse(m, l, currentEpoch[l], leader[l], "error", NoSnapshot,
                                        0, 0, <<>>), m)
       ELSE IF m.snapshot \notin snapshots[l]
       THEN Reply(FetchSnapshotResponse(m, l, currentEpoch[l], l, "notFound", NoSnapshot,
                                        0, 0, <<>>), m)
       ELSE IF m.position >= size
       THEN Reply(FetchSnapshotResponse(m, l, currentEpoch[l], l, "outOfRange", NoSnapshot,
                                        0, 0, <<>>), m)
       ELSE \E len \in 1..(size - m.position) :
               Reply(FetchSnapshotResponse(m, l, currentEpoch[l], l, "ok", m.snapshot, size, len,
                                           SubSeq(log[l], 1, m.snapshot[1])), m)
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars, snapVars, snapFetch>>

\* The follower learns a newer epoch or this epoch's leader first (which ends a transfer).  A
\* chunk at the transfer's position moves it past the chunk; a chunk of another position or
\* snapshot (duplicate, stale) is ignored, as is an answer for a transfer that is over;
\* notFound / outOfRange (the leader moved on) end the transfer, Fetch resumes; another error
\* is retried.  An answer whose size differs from the transfer's ends it.
HandleFetchSnapshotResponse(m) ==
    LET f == m.dst
        t == snapFetch[f]
        active == /\ Fetching(f) /\ t.size # t.position
                  /\ state[f] = "Follower" /\ m.src = t.leader /\ m.epoch = t.epoch
                  /\ t.epoch = currentEpoch[f]
        chunk == m.kind = "ok" /\ m.snapshot = t.snapshot /\ m.position = t.position
        sizeOk == t.size < 0 \/ m.size = t.size
    IN
    /\ m.type = "FetchSnapshotResponse"
    /\ alive[f]
    /\ CASE m.epoch > currentEpoch[f] ->
              /\ state' = [state EXCEPT ![f] = IF m.leader # Nil THEN "Follower" ELSE "Unattached"]
              /\ currentEpoch' = [currentEpoch EXCEPT ![f] = m.epoch]
              /\ votedFor' = [votedFor EXCEPT ![f] = Nil]
              /\ leader' = [leader EXCEPT ![f] = m.leader]
              /\ endOffset' = [endOffset EXCEPT ![f] = NoOffsets]
              /\ votesGranted' = [votesGranted EXCEPT ![f] = {}]
              /\ endorsed' = [endorsed EXCEPT ![f] = {}]
              /\ snapFetch' = [snapFetch EXCEPT ![f] = NoSnapFetch]
         [] m.epoch = currentEpoch[f] /\ leader[f] = Nil /\ m.leader \notin {Nil, f} ->
              /\ state' = [state EXCEPT ![f] = "Follower"]
              /\ leader' = [leader EXCEPT ![f] = m.leader]
              /\ votesGranted' = [votesGranted EXCEPT ![f] = {}]
              /\ snapFetch' = [snapFetch EXCEPT ![f] = NoSnapFetch]
              /\ UNCHANGED <<currentEpoch, votedFor, endOffset, endorsed>>
         [] active /\ m.kind \in {"notFound", "outOfRange"} ->
              /\ snapFetch' = [snapFetch EXCEPT ![f] = NoSnapFetch]
              /\ UNCHANGED <<state, currentEpoch, votedFor, leader, endOffset, votesGranted,
                             endorsed>>
         [] active /\ chunk /\ sizeOk ->
              /\ snapFetch' = [snapFetch EXCEPT ![f] = [@ EXCEPT !.position = @ + m.len,
                                                               !.size = m.size,
                                                               !.content = m.content]]
              /\ UNCHANGED <<state, currentEpoch, votedFor, leader, endOffset, votesGranted,
                             endorsed>>
         [] active /\ chunk /\ ~sizeOk ->
              /\ snapFetch' = [snapFetch EXCEPT ![f] = NoSnapFetch]
              /\ UNCHANGED <<state, currentEpoch, votedFor, leader, endOffset, votesGranted,
                             endorsed>>
         [] OTHER -> UNCHANGED <<state, currentEpoch, votedFor, leader, endOffset, votesGranted,
                                 endorsed, snapFetch>>
    /\ Discard(m)
    /\ UNCHANGED <<alive, logVars, votesRejected, ghostVars, snapVars>>

\* Every byte arrived (and the implementation validated them): the history becomes the
\* snapshot's, the log starts and ends at its end offset, older snapshots are gone, the HWM
\* is that offset (Kafka: the log's HWM after truncateToLatestSnapshot); Fetch resumes from
\* there.  The HWM never falls: a transfer of a snapshot ending below it never starts
\* (TransferStarts) and it does not move while Fetch is paused.
InstallSnapshot(s) ==
    LET t == snapFetch[s]
        o == t.snapshot[1]
    IN
    /\ alive[s]
    /\ Fetching(s) /\ t.size = t.position
    /\ log' = [log EXCEPT ![s] = t.content]
    /\ logStart' = [logStart EXCEPT ![s] = o]
    /\ snapshots' = [snapshots EXCEPT ![s] = {t.snapshot}]
    /\ highWatermark' = [highWatermark EXCEPT ![s] = o]
    /\ Commit(t.content, o, currentEpoch[s])
    /\ snapFetch' = [snapFetch EXCEPT ![s] = NoSnapFetch]
    /\ UNCHANGED <<serverVars, leaderVars, messages, restarts, elected>>

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
\* the leader as follower.  HWM and all in-memory bookkeeping are lost.  The only voter of its
\* voter set stands at once (Kafka's KafkaRaftClient.initialize): a Candidate has its own vote,
\* a majority (BecomeLeader); any other state is atStart (AtStartAfter), for ElectionTimeout.
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
       THEN /\ Room(Cardinality(VotersOf(s)) - 1)
            /\ messages' = AddAll(messages, VoteRequests(s, currentEpoch[s], FALSE))
       ELSE UNCHANGED messages
    /\ UNCHANGED <<currentEpoch, leader, log, votesRejected, ghostVars>>

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

\* `fetched` (Kafka's FollowerState.hasFetchedFromLeader) is kept by every step that leaves a
\* replica following the same leader in the same epoch, and reset by every other one (a
\* (re)entry into Follower starts it afresh); a Fetch response without error from the leader
\* of the follower's epoch sets it.  Conjoined to each step after the step's own effects.
StillFollowing(s) ==
    /\ alive[s] /\ alive'[s]
    /\ state[s] = "Follower" /\ state'[s] = "Follower"
    /\ currentEpoch'[s] = currentEpoch[s] /\ leader'[s] = leader[s]

\* `atStart` is set by a restart (alive again) of the only voter of its voter set as anything
\* but Candidate (Kafka's initialize: Unattached, Voted, Follower, Resigned), and kept while it
\* stays in that state and epoch: its ElectionTimeout ends it.  Conjoined with `fetched`'s rule.
StillStarting(s) ==
    alive[s] /\ alive'[s] /\ state'[s] = state[s] /\ currentEpoch'[s] = currentEpoch[s]

AtStartAfter ==
    atStart' = [s \in Server |->
                   IF ~alive[s] /\ alive'[s] THEN VotersOf(s) = {s} /\ state'[s] # "Candidate"
                   ELSE atStart[s] /\ StillStarting(s)]

KeepFetched == fetched' = [s \in Server |-> StillFollowing(s) /\ fetched[s]] /\ AtStartAfter

FetchedAfter(m) ==
    /\ fetched' = [s \in Server |->
                      StillFollowing(s)
                      /\ (fetched[s] \/ (s = m.dst /\ m.kind # "error" /\ m.src = leader[s]
                                         /\ m.epoch = currentEpoch[s]))]
    /\ AtStartAfter

\* A snapshot transfer is abandoned by any change of the follower's role, epoch or leader, and
\* by a crash (the chunks fetched so far are in a `.part` file, deleted at start).
KeepSnapFetch == snapFetch' = [s \in Server |-> IF StillFollowing(s) THEN snapFetch[s] ELSE NoSnapFetch]

\* Conjoined to every step that is not about snapshots.
NoSnapStep == UNCHANGED snapVars /\ KeepSnapFetch

\* The Fetch answer that starts a transfer: it answers the fetch the follower would send now,
\* from its leader in its epoch, and names a snapshot a leader of this epoch may hold that
\* is not older than the follower's log start nor ends below its HWM (else the
\* implementation backs off; a leader never names such a snapshot: TypeOK holds with or
\* without the HWM conjunct).
TransferStarts(m) ==
    LET f == m.dst IN
    /\ m.kind = "snapshot"
    /\ alive[f] /\ state[f] = "Follower" /\ leader[f] = m.src /\ m.epoch = currentEpoch[f]
    /\ m.fetchOffset = Len(log[f]) /\ m.lastFetchedEpoch = LastEpoch(log[f])
    /\ ~Fetching(f)
    /\ m.snapshot[1] > 0 /\ m.snapshot[2] <= currentEpoch[f] /\ m.snapshot[1] >= logStart[f]
    /\ m.snapshot[1] >= highWatermark[f]

SnapFetchAfter(m) ==
    snapFetch' = [s \in Server |->
                     IF s = m.dst /\ TransferStarts(m)
                     THEN [snapshot |-> m.snapshot, leader |-> m.src, epoch |-> m.epoch,
                           position |-> 0, size |-> -1, content |-> <<>>]
                     ELSE IF StillFollowing(s) THEN snapFetch[s] ELSE NoSnapFetch]

\* The KIP-630 steps (all disabled while MaxSnapshots = 0: nothing to transfer).
SnapshotNext ==
    \/ \E s \in Server, o \in 1..MaxLogLen + MaxEpoch : CreateSnapshot(s, o) /\ KeepFetched
    \/ \E s \in Server : AdvanceLogStartOffset(s) /\ KeepFetched
    \/ \E s \in Server : SendFetchSnapshotRequest(s) /\ KeepFetched
    \/ \E s \in Server : InstallSnapshot(s) /\ KeepFetched
    \/ \E m \in DOMAIN messages : HandleFetchSnapshotRequest(m) /\ KeepFetched
    \/ \E m \in DOMAIN messages : HandleFetchSnapshotResponse(m) /\ FetchedAfter(m)

\* Every step but HandleFetchResponse, each with its effect on `fetched`.
NextExceptFetchResponse ==
    \/ \E s \in Server : ElectionTimeout(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : BecomeCandidate(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : BecomeLeader(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : Resign(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server, v \in Values : ClientAppend(s, v) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : SendFetchRequest(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : AdvanceHighWatermark(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s, t \in Server : AddVoter(s, t) /\ KeepFetched /\ NoSnapStep
    \/ \E s, t \in Server : RemoveVoter(s, t) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : Crash(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : Restart(s) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleVoteRequest(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleVoteResponse(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochRequest(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochResponse(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleEndQuorumEpochRequest(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleFetchRequest(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : DropMessage(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : DuplicateMessage(m) /\ KeepFetched /\ NoSnapStep

Next ==
    \/ NextExceptFetchResponse
    \/ \E m \in DOMAIN messages : HandleFetchResponse(m) /\ FetchedAfter(m) /\ UNCHANGED snapVars
                                   /\ SnapFetchAfter(m)
    \/ SnapshotNext

Spec == Init /\ [][Next]_vars

-----------------------------------------------------------------------------
(* Safety *)

Entry == [epoch : 0..MaxEpoch, value : Values \cup {LC, KV}]
    \cup [epoch : 0..MaxEpoch, value : {VR}, voters : SUBSET Server]

TypeOK ==
    /\ state \in [Server -> States]
    /\ currentEpoch \in [Server -> 0..MaxEpoch]
    /\ votedFor \in [Server -> Server \cup {Nil}]
    /\ leader \in [Server -> Server \cup {Nil}]
    /\ \A s \in Server : log[s] \in Seq(Entry)
    /\ \A s \in Server : highWatermark[s] \in 0..Len(log[s])
    /\ alive \in [Server -> BOOLEAN]
    /\ endOffset \in [Server -> [Server -> Nat]]
    /\ votesGranted \in [Server -> SUBSET Server]
    /\ votesRejected \in [Server -> SUBSET Server]
    /\ fetched \in [Server -> BOOLEAN]
    /\ \A s \in Server : fetched[s] => state[s] = "Follower"
    /\ atStart \in [Server -> BOOLEAN]
    /\ \A s \in Server : atStart[s] => alive[s]
    /\ endorsed \in [Server -> SUBSET Server]
    /\ \A m \in DOMAIN messages : messages[m] \in Nat \ {0}
    /\ restarts \in 0..MaxRestarts
    /\ \A s \in Server : logStart[s] \in 0..Len(log[s])
    /\ \A s \in Server : snapshots[s] \subseteq (1..Len(log[s])) \X (0..MaxEpoch)
    /\ \A s \in Server : Fetching(s) => state[s] = "Follower" /\ alive[s]

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

\* A committed record stays, at its offset, on a majority of voters (of a static quorum: a
\* dynamic one's voter sets change) and in the log of every leader of its commit epoch or
\* later.
CommittedNeverLost ==
    \A c \in committed :
        /\ ~Dynamic => IsMajority({v \in Voters : Holds(v, c)})
        /\ \A l \in Server : state[l] = "Leader" /\ currentEpoch[l] >= c[3] => Holds(l, c)

\* Every record below a leader's HWM is held by a majority of voters (of a static quorum: in a
\* dynamic one, a later change may add a voter that does not hold it yet; see
\* MajorityReachedNewHighWatermark).
MajorityReachedHighWatermark ==
    \A l \in Server : ~Dynamic /\ state[l] = "Leader" =>
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

\* KIP-630: the log starts at a snapshot the replica holds (or at 0), and it holds none older.
LogStartAtSnapshot ==
    \A s \in Server :
        /\ logStart[s] > 0 => \E x \in snapshots[s] : x[1] = logStart[s]
        /\ \A x \in snapshots[s] : x[1] >= logStart[s]

\* A snapshot holds committed records only, and it is the replica's history up to its end
\* offset: <<o, e>> ends with a record of epoch e, and every record 1..o is committed at its
\* offset (the SnapshotBeyondHwm mutant breaks this).
SnapshotMatchesLog ==
    \A s \in Server : \A x \in snapshots[s] :
        /\ x[1] <= Len(log[s])
        /\ log[s][x[1]].epoch = x[2]
        /\ \A i \in 1..x[1] : \E c \in committed : c[1] = i /\ c[2] = log[s][i]

\* No history holds two Voters records that are not committed (one change at a time).
AtMostOneUncommittedVoterChange ==
    \A s \in Server :
        Cardinality({i \in 1..Len(log[s]) :
                        /\ IsVotersRecord(log[s][i])
                        /\ ~\E c \in committed : c[1] = i /\ c[2] = log[s][i]}) <= 1

\* Action properties (checked as PROPERTIES).

\* Whenever a leader moves its HWM to n, a majority of its current voters hold its log up to
\* n (the leader itself only if it is a voter).  A removed leader that counted itself breaks
\* it (the RemovedLeaderCountsItself mutant).
MajorityReachedNewHighWatermark ==
    [][\A l \in Server :
         (state[l] = "Leader" /\ state'[l] = "Leader" /\ highWatermark'[l] > highWatermark[l])
            => IsMajorityOf({v \in VotersOf(l) :
                               /\ Len(log[v]) >= highWatermark'[l]
                               /\ SubSeq(log[v], 1, highWatermark'[l])
                                    = SubSeq(log[l], 1, highWatermark'[l])},
                            VotersOf(l))]_vars

EpochMonotonic == [][\A s \in Server : currentEpoch'[s] >= currentEpoch[s]]_vars

\* The HWM a running server exposes never decreases (it restarts from 0 after a crash).
HighWatermarkMonotonic ==
    [][\A s \in Server : alive[s] /\ alive'[s] => highWatermark'[s] >= highWatermark[s]]_vars

-----------------------------------------------------------------------------
(* Liveness: no faults, and timeouts only while no election is under way (the effect of
   randomised election timeouts) *)

Quiet == \A t \in Server : state[t] \notin {"Prospective", "Candidate", "Leader"}

LiveElectionTimeout(s) == Quiet /\ ElectionTimeout(s)

LiveNextExceptFetchResponse ==
    \/ \E s \in Server : LiveElectionTimeout(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : BecomeCandidate(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : BecomeLeader(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server, v \in Values : ClientAppend(s, v) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : SendFetchRequest(s) /\ KeepFetched /\ NoSnapStep
    \/ \E s \in Server : AdvanceHighWatermark(s) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleVoteRequest(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleVoteResponse(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochRequest(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleBeginQuorumEpochResponse(m) /\ KeepFetched /\ NoSnapStep
    \/ \E m \in DOMAIN messages : HandleFetchRequest(m) /\ KeepFetched /\ NoSnapStep

LiveNext ==
    \/ LiveNextExceptFetchResponse
    \/ \E m \in DOMAIN messages : HandleFetchResponse(m) /\ FetchedAfter(m) /\ NoSnapStep

LiveSpec ==
    /\ Init /\ [][LiveNext]_vars
    /\ \A s \in Server :
          /\ WF_vars(LiveElectionTimeout(s) /\ KeepFetched /\ NoSnapStep)
          /\ WF_vars(BecomeCandidate(s) /\ KeepFetched /\ NoSnapStep)
          /\ WF_vars(BecomeLeader(s) /\ KeepFetched /\ NoSnapStep)
    /\ WF_vars(\E m \in DOMAIN messages : HandleVoteRequest(m) /\ KeepFetched /\ NoSnapStep)
    /\ WF_vars(\E m \in DOMAIN messages : HandleVoteResponse(m) /\ KeepFetched /\ NoSnapStep)

EventuallyLeaderElected == <>(\E s \in Server : state[s] = "Leader")

-----------------------------------------------------------------------------
(* Pre-vote is exercised: witnesses that must be reachable, each stated as "this never
   happens" and reported violated by a model of kind witness. *)

\* A follower that has fetched from its leader rejects a pre-vote of its epoch (the disruption
\* of a live leader that KIP-996 prevents).  An invariant.
NoPreVoteRejectedByFollower ==
    ~\E m \in DOMAIN messages :
        /\ m.type = "VoteResponse" /\ m.preVote /\ ~m.granted
        /\ state[m.src] = "Follower" /\ fetched[m.src] /\ m.epoch = currentEpoch[m.src]

\* Action properties: a Prospective becomes Candidate although a voter rejected its pre-vote
\* of this round; a Prospective that knew a leader loses on rejections and follows it again.
NoPreVoteWonDespiteRejection ==
    [][~\E s \in Server : BecomeCandidate(s) /\ votesRejected[s] # {}]_vars

NoPreVoteLostToRejections ==
    [][~\E m \in DOMAIN messages :
          /\ HandleVoteResponse(m)
          /\ state[m.dst] = "Prospective" /\ state'[m.dst] = "Follower"
          /\ currentEpoch'[m.dst] = currentEpoch[m.dst]]_vars

\* Action property: the only voter of its voter set, restarted Resigned, stands in its epoch
\* (atStart: Kafka's KafkaRaftClient.initialize) instead of moving to Unattached in the next.
NoLoneVoterStandsFromResigned ==
    [][\A s \in Server : state[s] = "Resigned" => state'[s] # "Prospective"]_vars

\* votesRejected is read only in Prospective and reset on entering it: outside, it is left out.
ModelView == <<state, currentEpoch, votedFor, leader, log, highWatermark, alive, endOffset,
               votesGranted,
               [s \in Server |-> IF state[s] = "Prospective" THEN votesRejected[s] ELSE {}],
               fetched, atStart, messages, restarts, elected, committed, logStart, snapshots,
               snapFetch>>

\* Symmetry: voters among themselves, observers among themselves, and values.
Symmetry == Permutations(Voters) \cup Permutations(Observers) \cup Permutations(Values)
=============================================================================
