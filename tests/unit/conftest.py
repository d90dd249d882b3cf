"""Puts tests/support (shared helpers, e.g. memory_logs.py) on sys.path. Not tests/ itself: its
tests/refinement folder would shadow the `refinement` package."""

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parent.parent / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)
