"""Kept only for refinement/sim.py and refinement/stateful.py, which import the trace format
from here and belong to other helpers on this reshape: the format (keys, writer, reader) is
kraft.trace_format's. Once those two import kraft.trace_format, this module goes.
"""

from __future__ import annotations

from kraft.trace_format import (
    JsonObject,
    JsonValue,
    TraceEvent,
    TraceWriter,
    message_json,
    parse_line,
)

__all__ = ["JsonObject", "JsonValue", "TraceEvent", "TraceWriter", "message_json", "parse_line"]
