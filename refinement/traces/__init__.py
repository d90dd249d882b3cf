"""Trace validation: an implementation trace (ndjson, kraft.trace_format) checked by TLC
against spec/KRaft.tla through spec/TraceKRaft.tla (documented in spec/README.md, "Trace
validation").

- mapping: each trace event as spec steps ("ops") and the state to compare after them;
- lookahead: what the whole trace shows beyond one event (chunk sizes, answer counts, a
  dynamic quorum);
- validate: one trace through TLC, and which event it rejects;
- merge: the per-node traces of a real cluster as one trace;
- conformance: simulated seeds under fault profiles, each trace validated;
- __main__: the command line (`python -m refinement.traces validate|conformance`).
"""

from refinement.traces.conformance import (
    BASE_CONFORMANCE_PROFILES,
    CONFORMANCE_PROFILES,
    SIM_VOTERS,
    SNAPSHOT_CONFORMANCE_PROFILES,
    ConformanceRun,
    conformance,
    profile_voters,
    reconfig_conformance_profiles,
    simulate_trace,
)
from refinement.traces.mapping import MappedTrace, map_trace, spec_message
from refinement.traces.merge import merge_traces
from refinement.traces.validate import TraceValidation, validate_trace

__all__ = [
    "BASE_CONFORMANCE_PROFILES",
    "CONFORMANCE_PROFILES",
    "SIM_VOTERS",
    "SNAPSHOT_CONFORMANCE_PROFILES",
    "ConformanceRun",
    "MappedTrace",
    "TraceValidation",
    "conformance",
    "map_trace",
    "merge_traces",
    "profile_voters",
    "reconfig_conformance_profiles",
    "simulate_trace",
    "spec_message",
    "validate_trace",
]
