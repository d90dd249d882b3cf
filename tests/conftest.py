"""Shared by every test: tests/support (shared helpers and fakes) on sys.path, and the
hypothesis profile of tests/support/hypothesis_profiles.py loaded.

pytest puts tests/ itself on sys.path too (this file's folder); `refinement` still resolves to
the package at the repository root (a folder without __init__.py never shadows a package)."""

import sys
from pathlib import Path

_SUPPORT = str(Path(__file__).resolve().parent / "support")
if _SUPPORT not in sys.path:
    sys.path.insert(0, _SUPPORT)

from hypothesis import settings  # noqa: E402
from hypothesis_profiles import PROFILE  # noqa: E402

settings.load_profile(PROFILE)
