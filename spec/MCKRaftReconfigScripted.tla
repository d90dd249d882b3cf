---------------------- MODULE MCKRaftReconfigScripted ----------------------
(* KRaftReconfig with a scripted schedule, for the EarlyVoterChange mutant: s1 may stand *)
(* in epochs 1 and 3, s2 in epoch 2; only s4 fetches (in epoch 2); s1 may change only s4's *)
(* membership and s2 only s1's. Scripting only removes behaviours, so what TLC finds here *)
(* is a behaviour of the full spec.                                                       *)
EXTENDS KRaftReconfig
CONSTANTS s1, s2, s4
OngaroStands(s, e) == (s = s1 /\ e \in {1, 3}) \/ (s = s2 /\ e = 2)
OngaroFetches(s, e) == s = s4 /\ e = 2
\* s1 changes only s4's membership, s2 only s1's
OngaroChanges(l, k) == (l = s1 /\ k[1] = s4) \/ (l = s2 /\ k[1] = s1)
=============================================================================
