"""A Fetch whose last fetched epoch is older than every snapshot the leader holds is answered
with the leader's latest snapshot id, also while the leader's log still starts at 0 and holds
the records the fetcher asks for. This is Kafka 4.3.1's RaftLog.validateOffsetAndEpoch: only
a fetch from offset 0 of a log that starts at 0 skips the snapshot checks (the `startOffset()
== 0 && offset == 0` test); every other fetch is sent to the latest snapshot when it is below
the log start, at the log start in another epoch than the earliest snapshot's, or in an epoch
older than the earliest snapshot's.

Replica 1 of voters {1, 2, 3} starts with three records of epoch 1 and is elected in epoch 2
by hand with voter 2's votes; voter 2 fetches at its end, voter 3 stays behind at offset 3
(the end of epoch 1), so the leader's log start stays at 0 under KIP-630's live-replica rule
after it snapshots at its end (in epoch 2)."""

from __future__ import annotations

from hand_driven import HandDriven
from memory_logs import build_log, key

from kraft.core.effects import ElectionState, Send, WriteSnapshot
from kraft.core.events import ClientAppend, CreateSnapshot, Receive, SnapshotWritten
from kraft.core.messages import FetchRequest, FetchResponse
from kraft.errors import ErrorCode
from kraft.ids import ClusterId, Epoch, NodeId, Offset

CLUSTER = ClusterId("snapshot-old-epoch-fetch")


def test_a_fetch_in_an_epoch_before_every_snapshot_gets_the_latest_while_the_log_starts_at_0() -> (
    None
):
    lead = HandDriven(CLUSTER, (1, 2, 3), log=build_log([(1, 3)]),
                      election_state=ElectionState(Epoch(1)))  # fmt: skip
    lead.elect(2)
    epoch = lead.replica.view().epoch
    assert epoch == 2

    def fetch(src: int, offset: int, last_epoch: int) -> FetchResponse:
        req = FetchRequest(CLUSTER, key(src), epoch, Offset(offset), Epoch(last_epoch), Offset(0))
        [answer] = [
            e.message
            for e in lead.step(Receive(lead.now, NodeId(src), req))
            if isinstance(e, Send) and e.dst == src and isinstance(e.message, FetchResponse)
        ]
        assert answer.error is ErrorCode.NONE
        return answer

    lead.step(ClientAppend(lead.now, ((None, b"a"), (None, b"b")), 1))
    lead.tick(lead.now)
    end = lead.end
    assert end == 6  # epoch 1's three records, the LeaderChange record, two values
    fetch(2, end, epoch)
    assert lead.replica.view().high_watermark == end
    first = fetch(3, 3, 1)  # no snapshot yet: voter 3 gets the records from offset 3
    assert first.snapshot_id is None and first.diverging_epoch is None and first.records
    [write] = [e for e in lead.step(CreateSnapshot(lead.now, Offset(end)))
               if isinstance(e, WriteSnapshot)]  # fmt: skip
    snapshot = write.snapshot_id
    assert snapshot.epoch == epoch
    lead.step(SnapshotWritten(lead.now, snapshot))
    assert lead.replica.view().log_start_offset == 0  # voter 3 is live and behind it

    again = fetch(3, 3, 1)  # the same position, now that a snapshot of epoch 2 is held
    assert again.snapshot_id == snapshot
    assert again.diverging_epoch is None and not again.records
    # A fetch in the snapshot's epoch is checked against the log as before.
    assert fetch(2, end, epoch).snapshot_id is None
