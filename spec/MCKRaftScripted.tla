--------------------------- MODULE MCKRaftScripted ---------------------------
(* KRaft.tla with a script for a mutant model: s1 may stand (be Candidate or Leader) in     *)
(* epochs 1 and 3, s2 in epochs 2 and 4 (Raft's figure 8); a server is Prospective only     *)
(* before an epoch it may stand in.  The script is a state                                   *)
(* constraint: it only removes behaviours, so what TLC finds here is a behaviour of         *)
(* KRaft.tla; it keeps the search short, which pre-vote rounds make long.                   *)
EXTENDS KRaft
CONSTANTS s1, s2
Figure8Stands(s, e) == (s = s1 /\ e \in {1, 3}) \/ (s = s2 /\ e \in {2, 4})
Script ==
    \A s \in Server :
        /\ state[s] \in {"Candidate", "Leader"} => Figure8Stands(s, currentEpoch[s])
        \* s1 and s2 ask for pre-votes only for an epoch they may stand in
        /\ state[s] = "Prospective" => Figure8Stands(s, currentEpoch[s] + 1)
=============================================================================
