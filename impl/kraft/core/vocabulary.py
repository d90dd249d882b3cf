"""The one vocabulary: replica states and protocol actions, named as in the TLA+ specs.

A TLA+ action, a trace event and the code path that performs the step carry the same name;
the enum values are those names verbatim.
"""

from __future__ import annotations

from enum import Enum


class ReplicaState(Enum):
    UNATTACHED = "Unattached"
    VOTED = "Voted"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"
    # KIP-996 pre-vote: a voter asking whether it could win before it bumps the epoch.
    PROSPECTIVE = "Prospective"


class Action(Enum):
    # A voter's election timer (fetch timer for a follower) ran out: Unattached, Voted,
    # Follower and Candidate become Prospective; Prospective goes back to Follower, Voted or
    # Unattached; Resigned becomes Unattached in the next epoch (Kafka 4.x).
    ELECTION_TIMEOUT = "ElectionTimeout"
    # A Prospective won a majority of pre-votes: epoch + 1, vote for itself, ask for votes.
    BECOME_CANDIDATE = "BecomeCandidate"
    HANDLE_VOTE_REQUEST = "HandleVoteRequest"
    HANDLE_VOTE_RESPONSE = "HandleVoteResponse"
    BECOME_LEADER = "BecomeLeader"
    HANDLE_BEGIN_QUORUM_EPOCH_REQUEST = "HandleBeginQuorumEpochRequest"
    HANDLE_BEGIN_QUORUM_EPOCH_RESPONSE = "HandleBeginQuorumEpochResponse"
    HANDLE_END_QUORUM_EPOCH_REQUEST = "HandleEndQuorumEpochRequest"
    HANDLE_END_QUORUM_EPOCH_RESPONSE = "HandleEndQuorumEpochResponse"
    CLIENT_APPEND = "ClientAppend"
    SEND_FETCH_REQUEST = "SendFetchRequest"
    HANDLE_FETCH_REQUEST = "HandleFetchRequest"
    HANDLE_FETCH_RESPONSE = "HandleFetchResponse"
    ADVANCE_HIGH_WATERMARK = "AdvanceHighWatermark"
    RESIGN = "Resign"
    CRASH = "Crash"
    RESTART = "Restart"
    # KIP-630 (spec/KRaftSnapshot.tla).
    CREATE_SNAPSHOT = "CreateSnapshot"
    SEND_FETCH_SNAPSHOT_REQUEST = "SendFetchSnapshotRequest"
    HANDLE_FETCH_SNAPSHOT_REQUEST = "HandleFetchSnapshotRequest"
    HANDLE_FETCH_SNAPSHOT_RESPONSE = "HandleFetchSnapshotResponse"
    # The spec's Install, the end of HandleFetchSnapshotResponse on the last chunk: here a step
    # of its own, taken once the driver validated the fetched snapshot (SnapshotValidated).
    INSTALL_SNAPSHOT = "InstallSnapshot"
    ADVANCE_LOG_START_OFFSET = "AdvanceLogStartOffset"
    ADD_VOTER = "AddVoter"
    REMOVE_VOTER = "RemoveVoter"
