"""The pure, deterministic KRaft replica: events in, effects out; no clock, socket or file."""
