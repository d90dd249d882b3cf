---------------------- MODULE MCKRaftReconfigScripted ----------------------
(* KRaftReconfig with a scripted schedule, for the EarlyVoterChange mutant: s1 may stand   *)
(* in epochs 1 and 3, s2 in epoch 2; only s4 fetches, and only in epoch 2. Scripting only  *)
(* removes behaviours, so what TLC finds here is a behaviour of the full spec.             *)
EXTENDS KRaftReconfig
CONSTANTS s1, s2, s4
OngaroStands(s, e) == (s = s1 /\ e \in {1, 3}) \/ (s = s2 /\ e = 2)
OngaroFetches(s, e) == s = s4 /\ e = 2
=============================================================================
