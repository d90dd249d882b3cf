----------------------------- MODULE TraceKRaft -----------------------------
(***************************************************************************)
(* Trace validation of the implementation against KRaft.tla.               *)
(*                                                                         *)
(* refinement/traces/ turns an ndjson trace into the module TraceData:     *)
(* `Trace` is a sequence of events, each a sequence `ops` of spec steps    *)
(* (a KRaft action with its parameters fixed by the event, or one of the  *)
(* few bridging steps below) and the acting node's logged state after the *)
(* event.  TraceNext takes op k of event l; after an event's last op the  *)
(* logged state must match.  A behaviour that consumes every event is a   *)
(* behaviour of KRaft (plus the bridging steps) that the implementation   *)
(* produced.                                                               *)
(*                                                                         *)
(* Every event has a fixed number of ops, so all states at one BFS depth  *)
(* are at the same (l, k): TLC's depth tells whether the whole trace was  *)
(* consumed, or else the first event no behaviour of the spec can match.  *)
(***************************************************************************)
EXTENDS KRaft, Integers, TraceData

VARIABLES
    l,      \* the event to match next (1-based)
    k,      \* the op of that event to take next
    sent,   \* every message that was ever in the bag (history, for re-delivery)
    cur,    \* the message the event is about, chosen by its "Recv" op
    moved   \* whether `cur` was addressed to an earlier incarnation of its receiver (Delivered)

traceVars == <<l, k, sent, cur, moved>>

NoMessage == [type |-> "none"]

\* Nil for trace runs (the config substitutes it): traces write a missing node id as -1.
NilValue == -1

N(x) == IF x = -1 THEN Nil ELSE x

\* Incarnations (a dynamic quorum): a node that lost its data directory comes back with a new
\* directory id, a different replica to KIP-853, so refinement/traces/incarnations.py gives it
\* a server of its own; TraceData's Alias maps such a server to its node id.  Logged states
\* and messages name nodes by id: they are compared modulo Alias.  Alias is empty for every
\* other trace, where Id is the identity and Incs(x) = {x}.
Id(x) == IF x \in DOMAIN Alias THEN Alias[x] ELSE x
Incs(x) == {x} \cup {t \in DOMAIN Alias : Alias[t] = x}

TraceInit ==
    /\ Init
    /\ l = 1
    /\ k = 1
    /\ sent = {}
    /\ cur = NoMessage
    /\ moved = FALSE

-----------------------------------------------------------------------------
(* Matching a logged message to a spec message *)

\* Requests and most responses carry every spec field, so refinement/traces/mapping.py
\* writes the spec message itself (`exact`).  A FetchResponse does not say which fetch it
\* answers (the spec message does), and its records are summarised as batches
\* <<base, last, epoch>>.
FetchMatches(r, p) ==
    /\ r.type = "FetchResponse"
    \* An answer to a bootstrap fetch (BootstrapFetch) comes from Kafka's id -2, -3, ... of
    \* a bootstrap server: from some voter.
    /\ Id(r.src) = p.src \/ p.src < -1
    /\ Id(r.dst) = p.dst /\ r.epoch = p.epoch /\ Id(r.leader) = p.leader
    /\ r.kind = p.kind
    \* An error answer carries the responder's HWM in the implementation, none in KRaft.
    /\ p.kind # "error" => r.hwm = p.hwm
    \* At offset 0 the epoch names nothing; the implementation echoes the fetch epoch there.
    /\ p.kind = "diverging" => r.divEnd = p.divEnd /\ (p.divEnd > 0 => r.divEpoch = p.divEpoch)
    /\ p.kind = "snapshot" => r.snapshot = p.snapshot
    /\ Len(r.entries) = p.count
    /\ p.count > 0 => r.fetchOffset = p.batches[1][1] - 1
    /\ \A b \in 1..Len(p.batches) :
          \A o \in p.batches[b][1]..p.batches[b][2] :
             r.entries[o - p.batches[1][1] + 1].epoch = p.batches[b][3]

\* A FetchSnapshotResponse carries the snapshot's content in the spec (bytes in the
\* implementation), so it is matched by its other fields; `len` is the chunk's length in bytes.
SnapMatches(r, p) ==
    /\ r.type = "FetchSnapshotResponse"
    /\ Id(r.src) = p.src /\ Id(r.dst) = p.dst /\ r.epoch = p.epoch /\ Id(r.leader) = p.leader
    /\ r.kind = p.kind
    /\ p.kind = "ok" =>
          /\ r.snapshot = p.snapshot /\ r.position = p.position
          /\ r.size = p.size /\ r.len = p.len

\* A VoteResponse does not say whether it answers a pre-vote (Kafka's wire format has no such
\* field); unless the trace tells (`preVote` logged), either spec response matches (`anyPre`).
\* The spec messages a logged exact one may be: its node ids (src, dst, leader, successors)
\* each any incarnation of the node (just the message itself where Alias is empty).
SeqIncs(q) == {f \in [DOMAIN q -> UNION {Incs(q[i]) : i \in DOMAIN q}] : \A i \in DOMAIN q : f[i] \in Incs(q[i])}
Variants(m) ==
    LET ends == {[m EXCEPT !.src = a, !.dst = b] : a \in Incs(m.src), b \in Incs(m.dst)}
        ldrs == IF "leader" \in DOMAIN m
                THEN {[v EXCEPT !.leader = x] : v \in ends, x \in Incs(m.leader)} ELSE ends
    IN
    IF DOMAIN Alias = {} THEN {m}
    ELSE IF "successors" \in DOMAIN m
    THEN {[v EXCEPT !.successors = q] : v \in ldrs, q \in SeqIncs(m.successors)}
    ELSE ldrs

Matches(r, op) ==
    IF ~op.exact /\ op.m.type = "FetchSnapshotResponse" THEN SnapMatches(r, op.m)
    ELSE IF ~op.exact THEN FetchMatches(r, op.m)
    ELSE IF op.anyPre
    THEN r.type = op.m.type /\ [r EXCEPT !.preVote = op.m.preVote] \in Variants(op.m)
    ELSE r \in Variants(op.m)

Candidates(op) ==
    IF ~op.exact THEN sent
    ELSE IF op.anyPre THEN {[v EXCEPT !.preVote = b] : v \in Variants(op.m), b \in BOOLEAN} \cap sent
    ELSE Variants(op.m) \cap sent

\* A message to an earlier incarnation of the receiver reaches the new one (the network
\* addresses nodes, not directories): the new replica handles it.  An answer that names an
\* earlier incarnation of the receiver as the leader names no leader it knows: the receiver
\* is not that leader (its node id is, so the implementation sees its own id and knows none).
Delivered(r, n) ==
    LET r1 == IF r.dst # n /\ Id(r.dst) = Id(n) THEN [r EXCEPT !.dst = n] ELSE r IN
    IF "leader" \in DOMAIN r1 /\ r1.leader # n /\ Id(r1.leader) = Id(n)
    THEN [r1 EXCEPT !.leader = Nil] ELSE r1

\* Re-delivery: a message sent earlier arrives again.  The implementation retransmits
\* identical requests (retries, a parked fetch answered later) and the network duplicates;
\* in KRaft that is DuplicateMessage taken while the message was in the bag.
\* With incarnations, a message to the receiver itself is taken before one to an earlier
\* incarnation, and of messages alike but for an incarnation, the newest sender's.
Pool(op) ==
    LET all == {r \in Candidates(op) : Matches(r, op)}
        direct == {r \in all : r.dst = op.n}
        near == IF direct # {} THEN direct ELSE all
    IN
    {r \in near : ~\E q \in near : q # r /\ Id(q.src) = Id(r.src) /\ q.src > r.src}

Recv(op) ==
    \E r0 \in IF DOMAIN Alias = {} THEN Candidates(op) ELSE Pool(op) :
        LET r == Delivered(r0, op.n) IN
        /\ Matches(r0, op)
        /\ cur' = r
        /\ moved' = (r.dst # r0.dst)
        /\ IF r \in DOMAIN messages THEN UNCHANGED messages ELSE messages' = Add(messages, r)
        /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

Drop(op) ==
    IF \E r \in DOMAIN messages : Matches(r, op)
    THEN \E r \in DOMAIN messages : Matches(r, op) /\ DropMessage(r)
    ELSE UNCHANGED vars  \* the lost copy was a retransmission

-----------------------------------------------------------------------------
(* Bridging steps: what the implementation legitimately does that KRaft leaves out *)

\* A response that names the leader of the receiver's epoch teaches it the leader (the
\* implementation reads the leader from every response, as Kafka does).  Only a real leader
\* of that epoch can be learned.
LearnLeader(s, ldr, e) ==
    IF /\ alive[s] /\ e = currentEpoch[s] /\ leader[s] = Nil /\ ldr \notin {Nil, s}
    THEN /\ <<e, ldr>> \in elected
         /\ state' = [state EXCEPT ![s] = "Follower"]
         /\ leader' = [leader EXCEPT ![s] = ldr]
         /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
         /\ UNCHANGED <<currentEpoch, votedFor, alive, endOffset, votesRejected, endorsed, logVars,
                        messages, ghostVars>>
    ELSE UNCHANGED vars

\* An EndQuorumEpoch answer is no message of KRaft's, but it names the answerer's epoch and
\* leader, and the implementation adopts a newer epoch from it as from any response (Kafka's
\* maybeHandleCommonResponse): a resigned leader whose successor was elected meanwhile
\* follows it (or, with no leader named, is Unattached in that epoch).  Only a real leader
\* of that epoch can be followed.
LearnNewerLeader(s, ldr, e) ==
    IF alive[s] /\ e > currentEpoch[s]
    THEN /\ IF ldr \notin {Nil, s}
            THEN /\ <<e, ldr>> \in elected
                 /\ state' = [state EXCEPT ![s] = "Follower"]
                 /\ leader' = [leader EXCEPT ![s] = ldr]
            ELSE /\ state' = [state EXCEPT ![s] = "Unattached"]
                 /\ leader' = [leader EXCEPT ![s] = Nil]
         /\ currentEpoch' = [currentEpoch EXCEPT ![s] = e]
         /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
         /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
         /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
         /\ endorsed' = [endorsed EXCEPT ![s] = {}]
         /\ UNCHANGED <<alive, votesRejected, logVars, messages, ghostVars>>
    ELSE UNCHANGED vars

\* The implementation starts a new fetch while an old one may still be in the network (after
\* a fetch timeout, or at once on learning a new leader); KRaft's one-fetch-in-flight guard is
\* an abstraction of its connection handling, so it is left out here.  An observer that knows
\* no leader asks the voters in turn; so does an observer whose leader went silent (its fetch
\* timeout expired: Kafka's pollFollowerAsObserver), which stays that leader's Follower and
\* asks the leader and the voters in turn.  The trace does not say which one, and these
\* fetches are all alike (same epoch, offset and last epoch), so a choice of one destination
\* per send would multiply the behaviours by the voters each time.  An observer sends to every
\* voter (and its leader) instead (KRaft's SendFetchRequest once per destination): the extra
\* copies are never delivered unless the trace shows that node handling such a fetch, which
\* the observer did send it.  An observer asking the voters sends Fetch even while it fetches
\* a snapshot from the silent leader.
TraceSendFetchRequest(s) ==
    LET req(d) == [type |-> "FetchRequest", src |-> s, dst |-> d, epoch |-> currentEpoch[s],
                   fetchOffset |-> Len(log[s]), lastFetchedEpoch |-> LastEpoch(log[s])]
        observer == s \notin VotersOf(s)
        known == IF leader[s] # Nil THEN {leader[s]} ELSE {}
    IN
    /\ alive[s]
    /\ FetchesNow(s)
    /\ ~Fetching(s) \/ observer
    /\ messages' = IF ~observer THEN Add(messages, req(leader[s]))
                   ELSE AddAll(messages, {req(d) : d \in (VotersOf(s) \cup known) \ {s}})
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

NewIn(r) == messages'[r] > (IF r \in DOMAIN messages THEN messages[r] ELSE 0)

\* A node of a dynamic quorum that knows no leader and is no voter also sends Fetch to its
\* `controller.quorum.bootstrap.servers` (the bootstrap voters) itself, outside the core
\* (kraft.server.node's discovery, like Kafka's observers): the request the core would send
\* by its own discovery rule, here to one bootstrap voter; the trace shows it only where a
\* voter handles it.  A request already sent needs none.
BootstrapFetch(m) ==
    LET s == m.src IN
    IF m \in sent THEN UNCHANGED vars
    ELSE /\ Dynamic
         /\ m.type = "FetchRequest" /\ m.dst \in Voters
         /\ alive[s] /\ s \notin VotersOf(s) /\ leader[s] = Nil
         /\ m.epoch = currentEpoch[s] /\ m.fetchOffset = Len(log[s])
         /\ m.lastFetchedEpoch = LastEpoch(log[s])
         /\ messages' = Add(messages, m)
         /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

\* A leader announces itself again (Kafka's maybeSendBeginQuorumEpochRequests: every
\* quorum.fetch.timeout.ms / 2 to each voter that has not fetched within it), also to a voter
\* added after its election, which BecomeLeader's requests never reached.  The trace shows such
\* a request only where a replica handles it (sent to replica n); only the leader of that epoch
\* sends one.  A request already sent needs none.
ResendBeginQuorumEpoch(m, n) ==
    IF Variants(m) \cap sent # {} THEN UNCHANGED vars
    ELSE \E r \in Variants(m) :
            /\ r.type = "BeginQuorumEpochRequest" /\ r.dst = n
            /\ <<r.epoch, r.src>> \in elected
            /\ messages' = Add(messages, r)
            /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

\* Likewise for FetchSnapshot: a lost request or answer is asked for again after the request
\* timeout, while the old one may still be in the network.
TraceSendFetchSnapshotRequest(s) ==
    LET t == snapFetch[s] IN
    /\ alive[s]
    /\ state[s] = "Follower"
    /\ Fetching(s)
    /\ t.position < t.size \/ t.size < 0
    /\ messages' = Add(messages,
          [type |-> "FetchSnapshotRequest", src |-> s, dst |-> t.leader, epoch |-> currentEpoch[s],
           snapshot |-> t.snapshot, position |-> t.position])
    /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars, snapVars, snapFetch>>

\* The leader's chunk has the length the implementation's answer had (`len`, from the trace;
\* 0 when no answer was ever seen: then the rest of the snapshot).
TraceHandleFetchSnapshotRequest(m, len) ==
    /\ HandleFetchSnapshotRequest(m)
    /\ \A r \in DOMAIN messages' :
          (NewIn(r) /\ r.type = "FetchSnapshotResponse" /\ r.kind = "ok")
             => r.len = IF len > 0 THEN len ELSE r.size - r.position

\* The driver found the fetched snapshot invalid: the transfer starts over from Fetch.
AbandonSnapFetch(s) ==
    /\ Fetching(s) /\ snapFetch[s].size = snapFetch[s].position
    /\ snapFetch' = [snapFetch EXCEPT ![s] = NoSnapFetch]
    /\ UNCHANGED <<serverVars, logVars, leaderVars, messages, ghostVars, snapVars>>

\* The snapshot sizes the trace shows (TraceData's SnapSizes: <<leader, <<end, epoch>>>> ->
\* bytes), substituted for KRaft's abstract SnapshotSize.
TraceSnapshotSize(s, id) == IF <<s, id>> \in DOMAIN SnapSizes THEN SnapSizes[<<s, id>>] ELSE 1

\* The implementation's fetch size limit (1 MiB) is far above any simulated log: a response
\* carries every record after the fetch offset (KRaft allows any non-empty prefix).
\* Where the trace shows answers cut by a smaller limit (the snapshots profile's 160 bytes),
\* `counts` are the record counts of the answers logged after this step to a fetch from this
\* offset by this follower (refinement/traces/mapping.py): this fetch's answer is one of them
\* or, when it was lost unlogged, may be anything; the whole rest keeps that case cheap.
TraceHandleFetchRequest(m, counts) ==
    /\ HandleFetchRequest(m)
    /\ \A r \in DOMAIN messages' :
          (NewIn(r) /\ r.type = "FetchResponse" /\ r.kind = "ok" /\ r.entries # <<>>)
             => \/ Len(r.entries) = Len(log[m.dst]) - m.fetchOffset
                \/ \E i \in DOMAIN counts : Len(r.entries) = counts[i]

\* The leader advanced its HWM while handling the fetch and answers with the new one: the
\* response just sent by HandleFetchRequest leaves after AdvanceHighWatermark.
RefreshHwm(m) ==
    LET ld == m.dst IN
    \E r \in DOMAIN messages :
        /\ r.type = "FetchResponse" /\ r.src = ld /\ r.dst = m.src
        /\ r.fetchOffset = m.fetchOffset /\ r.lastFetchedEpoch = m.lastFetchedEpoch
        /\ r.epoch = currentEpoch[ld] /\ r.kind # "error"
        /\ r.hwm <= LeaderHwm(ld)
        /\ messages' = Add(Remove(messages, r), [r EXCEPT !.hwm = LeaderHwm(ld)])
        /\ UNCHANGED <<serverVars, logVars, leaderVars, ghostVars>>

\* A follower that truncated on a diverging answer also takes the leader's HWM (capped by its
\* log end, never lowered), as it does for records; KRaft takes it only with records.
RaiseHwm(f, h) ==
    LET hwm1 == Max(highWatermark[f], Min(h, Len(log[f]))) IN
    \/ UNCHANGED vars
    \/ /\ alive[f] /\ state[f] = "Follower"
       /\ highWatermark' = [highWatermark EXCEPT ![f] = hwm1]
       /\ Commit(log[f], hwm1, currentEpoch[f])
       /\ UNCHANGED <<serverVars, log, leaderVars, messages, restarts, elected>>

\* KIP-853: a vote request names the voter it is for by (id, directory id); an incarnation
\* with another directory id answers INVALID_VOTER_KEY (no grant), after moving to a larger
\* epoch as any vote request makes it (Kafka's handleVoteRequest checks in that order).
RejectVoterKey(m) ==
    LET s == m.dst
        newer == m.epoch > currentEpoch[s]
    IN
    /\ m.type = "VoteRequest"
    /\ alive[s]
    /\ IF newer
       THEN /\ state' = [state EXCEPT ![s] = "Unattached"]
            /\ currentEpoch' = [currentEpoch EXCEPT ![s] = m.epoch]
            /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
            /\ leader' = [leader EXCEPT ![s] = Nil]
            /\ endOffset' = [endOffset EXCEPT ![s] = NoOffsets]
            /\ votesGranted' = [votesGranted EXCEPT ![s] = {}]
            /\ endorsed' = [endorsed EXCEPT ![s] = {}]
            /\ UNCHANGED <<alive, votesRejected>>
       ELSE UNCHANGED <<serverVars, leaderVars>>
    /\ Reply([type |-> "VoteResponse", src |-> s, dst |-> m.src,
              epoch |-> IF newer THEN m.epoch ELSE currentEpoch[s],
              granted |-> FALSE, preVote |-> m.preVote], m)
    /\ UNCHANGED <<logVars, ghostVars>>

\* The simulator's disk-loss profile: an observer crashes and its whole data directory is gone
\* (log, snapshots, quorum-state); it restarts empty (Restart: Unattached in epoch 0) and
\* catches up from the leader.  Only an observer: it neither votes nor counts for the HWM, so
\* what it forgets decides nothing (a voter that loses its disk is KRaftReconfig's DiskLoss).
\* The transfer it was doing dies with it.
LoseDisk(s) ==
    /\ s \in Observers
    /\ alive[s]
    /\ restarts < MaxRestarts
    /\ alive' = [alive EXCEPT ![s] = FALSE]
    /\ restarts' = restarts + 1
    /\ state' = [state EXCEPT ![s] = "Unattached"]
    /\ currentEpoch' = [currentEpoch EXCEPT ![s] = 0]
    /\ votedFor' = [votedFor EXCEPT ![s] = Nil]
    /\ leader' = [leader EXCEPT ![s] = Nil]
    /\ log' = [log EXCEPT ![s] = <<>>]
    /\ highWatermark' = [highWatermark EXCEPT ![s] = 0]
    /\ logStart' = [logStart EXCEPT ![s] = 0]
    /\ snapshots' = [snapshots EXCEPT ![s] = {}]
    /\ snapFetch' = [snapFetch EXCEPT ![s] = NoSnapFetch]
    /\ UNCHANGED <<leaderVars, messages, elected, committed>>

\* KRaft's Commit, evaluated faster (the config substitutes it): "no record of `committed` is
\* <<j, l[j]>>" tested by membership for each epoch instead of by a scan of `committed`.
TraceCommit(lg, n, e) ==
    committed' = committed \cup
        {<<i, lg[i], e>> : i \in {j \in 1..n : \A x \in 0..MaxEpoch : <<j, lg[j], x>> \notin committed}}

-----------------------------------------------------------------------------
(* One op *)

DoOp(op) ==
    CASE op.a = "Skip" -> UNCHANGED vars
      [] op.a = "Recv" -> Recv(op)
      [] op.a = "BootstrapFetch" -> BootstrapFetch(op.m)
      [] op.a = "ResendBeginQuorumEpoch" -> ResendBeginQuorumEpoch(op.m, op.n)
      [] op.a = "Drop" -> Drop(op)
      [] op.a = "HandleVoteRequest" ->
            IF moved THEN RejectVoterKey(cur) ELSE HandleVoteRequest(cur)
      [] op.a = "HandleVoteResponse" -> HandleVoteResponse(cur)
      [] op.a = "HandleBeginQuorumEpochRequest" -> HandleBeginQuorumEpochRequest(cur)
      [] op.a = "HandleBeginQuorumEpochResponse" -> HandleBeginQuorumEpochResponse(cur)
      [] op.a = "HandleEndQuorumEpochRequest" -> HandleEndQuorumEpochRequest(cur)
      [] op.a = "HandleFetchRequest" -> TraceHandleFetchRequest(cur, op.xs)
      [] op.a = "HandleFetchResponse" -> HandleFetchResponse(cur)
      [] op.a = "RefreshHwm" -> RefreshHwm(cur)
      [] op.a = "RaiseHwm" -> RaiseHwm(op.n, op.x)
      [] op.a = "LearnLeader" -> LearnLeader(op.n, op.x, op.e)
      [] op.a = "LearnNewerLeader" -> LearnNewerLeader(op.n, N(op.x), op.e)
      [] op.a = "ElectionTimeout" -> ElectionTimeout(op.n)
      [] op.a = "BecomeCandidate" -> BecomeCandidate(op.n)
      [] op.a = "BecomeLeader" -> BecomeLeader(op.n)
      [] op.a = "Resign" -> Resign(op.n)
      [] op.a = "ClientAppend" -> ClientAppend(op.n, "v")
      [] op.a = "SendFetchRequest" -> TraceSendFetchRequest(op.n)
      [] op.a = "AdvanceHighWatermark" -> AdvanceHighWatermark(op.n)
      \* The voter a change names (-1 when the trace does not say: any replica).
      [] op.a = "AddVoter" ->
            IF op.x = -1 THEN \E t \in Server : AddVoter(op.n, t) ELSE AddVoter(op.n, op.x)
      \* The operator removes a node's identity in the voter set (maybe an old incarnation).
      [] op.a = "RemoveVoter" ->
            IF op.x = -1 THEN \E t \in Server : RemoveVoter(op.n, t)
            ELSE \E t \in Incs(op.x) : RemoveVoter(op.n, t)
      [] op.a = "Crash" -> Crash(op.n)
      [] op.a = "Restart" -> Restart(op.n)
      [] op.a = "CreateSnapshot" -> CreateSnapshot(op.n, op.x)
      [] op.a = "AdvanceLogStartOffset" -> AdvanceLogStartOffset(op.n)
      [] op.a = "SendFetchSnapshotRequest" -> TraceSendFetchSnapshotRequest(op.n)
      [] op.a = "HandleFetchSnapshotRequest" -> TraceHandleFetchSnapshotRequest(cur, op.x)
      [] op.a = "HandleFetchSnapshotResponse" -> HandleFetchSnapshotResponse(cur)
      [] op.a = "InstallSnapshot" -> InstallSnapshot(op.n)
      [] op.a = "AbandonSnapFetch" -> AbandonSnapFetch(op.n)
      [] op.a = "LoseDisk" -> LoseDisk(op.n)
      [] OTHER -> FALSE

\* The ops that set the snapshot variables themselves; every other op leaves them to
\* NoSnapStep (KRaft's Next does the same).
SnapOps == {"CreateSnapshot", "AdvanceLogStartOffset", "SendFetchSnapshotRequest",
            "HandleFetchSnapshotRequest", "InstallSnapshot", "AbandonSnapFetch", "LoseDisk"}

\* The logged state of the acting node after the event (primed: checked on the new state).
\* The implementation stores no vote once it knows a leader (Kafka's quorum-state), so the
\* vote is compared only in Unattached, Voted, Prospective and Candidate; a null HWM is 0.
StateMatches(e) ==
    LET s == e.node
        st == e.st
    IN
    \/ ~e.check
    \/ /\ e.check /\ st.state = "Down"
       /\ ~alive'[s]
       /\ currentEpoch'[s] = st.epoch
    \/ /\ e.check /\ st.state # "Down"
       /\ alive'[s]
       /\ state'[s] = st.state
       /\ currentEpoch'[s] = st.epoch
       /\ Id(leader'[s]) = N(st.leader)
       /\ st.state \in {"Unattached", "Voted", "Prospective", "Candidate"}
             => Id(votedFor'[s]) = N(st.votedFor)
       /\ Len(log'[s]) = st.endOffset
       /\ logStart'[s] = st.logStart
       /\ LastEpoch(log'[s]) = st.lastEpoch
       /\ highWatermark'[s] = st.hwm

\* KRaft's SnapshotMatchesLog, evaluated faster (membership per epoch, as TraceCommit).
TraceSnapshotMatchesLog ==
    \A s \in Server : \A x \in snapshots[s] :
        /\ x[1] <= Len(log[s])
        /\ log[s][x[1]].epoch = x[2]
        /\ \A i \in 1..x[1] : \E ep \in 0..MaxEpoch : <<i, log[s][i], ep>> \in committed

\* KRaft's AtMostOneUncommittedVoterChange, evaluated faster (membership per epoch, as
\* TraceCommit).
TraceAtMostOneUncommittedVoterChange ==
    \A s \in Server :
        Cardinality({i \in 1..Len(log[s]) :
                        /\ IsVotersRecord(log[s][i])
                        /\ \A ep \in 0..MaxEpoch : <<i, log[s][i], ep>> \notin committed}) <= 1

\* KRaft's safety invariants, required after every event (with CheckSafety): the bridging
\* steps must not make an unsafe behaviour look acceptable.  LogMatching is left out: it is
\* quadratic in the log length, and every log is held to the trace anyway.
SafetyOK ==
    CheckSafety =>
        /\ ElectionSafety
        /\ LeaderCompleteness
        /\ CommittedNeverLost
        /\ MajorityReachedHighWatermark
        /\ LogStartAtSnapshot
        /\ TraceSnapshotMatchesLog
        /\ Dynamic => TraceAtMostOneUncommittedVoterChange

\* The spec state a report shows: per server, and the messages in flight.
ServerView(s) ==
    [alive |-> alive[s], state |-> state[s], epoch |-> currentEpoch[s],
     votedFor |-> votedFor[s], leader |-> leader[s], endOffset |-> Len(log[s]),
     lastEpoch |-> LastEpoch(log[s]), hwm |-> highWatermark[s],
     logEpochs |-> [i \in 1..Len(log[s]) |-> log[s][i].epoch],
     fetchOffsets |-> endOffset[s], votesGranted |-> votesGranted[s],
     votesRejected |-> votesRejected[s], fetched |-> fetched[s],
     logStart |-> logStart[s], snapshots |-> snapshots[s],
     snapFetch |-> [snapFetch[s] EXCEPT !.content = Len(@)]]

Report == <<"TRACE-STATE", [servers |-> [s \in Server |-> ServerView(s)], inFlight |-> messages]>>

TraceNext ==
    LET e == Trace[l] IN
    /\ l <= Len(Trace)
    /\ DoOp(e.ops[k])
    \* KRaft's Next conjoins the effect on `fetched` (and on a snapshot transfer) to every step.
    /\ CASE e.ops[k].a = "HandleFetchResponse" ->
              FetchedAfter(cur) /\ UNCHANGED snapVars /\ SnapFetchAfter(cur)
         [] e.ops[k].a = "HandleFetchSnapshotResponse" -> FetchedAfter(cur)
         [] e.ops[k].a \in SnapOps -> KeepFetched
         [] OTHER -> KeepFetched /\ NoSnapStep
    /\ sent' = sent \cup DOMAIN messages'
    /\ IF e.ops[k].a = "Recv" THEN TRUE ELSE UNCHANGED <<cur, moved>>
    /\ IF k = Len(e.ops)
       THEN /\ StateMatches(e)
            /\ SafetyOK'
            /\ l' = l + 1
            /\ k' = 1
       ELSE /\ l' = l
            /\ k' = k + 1
    \* A rejection is reported by a second run that prints the states before event Target.
    /\ (l' = Target /\ k' = 1) => PrintT(Report')

TraceSpec == TraceInit /\ [][TraceNext]_<<vars, traceVars>>

\* The trace is accepted when TLC reaches depth 1 + (the number of ops of all events): every
\* event has a fixed number of ops, so the depth TLC reaches names the first event no
\* behaviour of the spec can match.
=============================================================================
