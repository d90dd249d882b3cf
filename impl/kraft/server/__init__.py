"""The networked KRaft node (`kraft start`): one asyncio process drives one pure replica.

- config.py: NodeConfig from Kafka-style properties and overrides.
- driver.py: the one task that steps the replica and performs its effects (group commit,
  commit-gated client answers).
- inbound.py: the listener (Kafka wire protocol plus the private client API).
- controller_apis.py: DescribeCluster and UpdateRaftVoter, answered as a Kafka controller does.
- peers.py: outbound connections to the other voters for the replica's requests.
- voters.py: the voters at start (a dynamic quorum's from its storage, KIP-853).
- node.py: startup (meta.properties, data-directory lock, log recovery, quorum-state), wiring,
  graceful shutdown.
"""
