"""Everything a replica keeps on disk (or, for the simulator, in memory), and nothing else.

- `replicated_log`: the `ReplicatedLog` contract the node and the simulator drive, its values
  and errors.
- `segmented_log`, `segment`, `recovery`: the log in Kafka's on-disk layout
  (`__cluster_metadata-0/%020d.log`), one segment file, and opening after a crash.
- `batch_checks`: what an append is checked for before either log stores it.
- `memory_log`: the same contract in memory (the simulator, the core's tests).
- `epoch_cache`: the leader-epoch cache and Kafka's `leader-epoch-checkpoint` file.
- `quorum_state`: the `quorum-state` file (the election state that must survive a restart).
- `meta_properties`: `meta.properties`, a formatted data directory's identity.
- `bootstrap`: a dynamic quorum's bootstrap checkpoint (`kraft format --initial-controllers`,
  KIP-853) and the voter sets a partition directory states at start.
- `durable`: crash-safe file replacement (every small metadata file goes through it).
- `log_adapter`: how a driver hands a log to the pure core (its state, a batch reader).
- `snapshot_files`: KIP-630 snapshots as Kafka stores them beside the log
  (`__cluster_metadata-0/%020d-%010d.checkpoint`): a streamed writer and a validating reader.
- `snapshot_directory`: a directory's valid snapshots, start-up cleanup, deletion, and a state
  machine (kraft.app.port) into and out of a checkpoint file.
"""
