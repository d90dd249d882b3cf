"""Fixtures of the interop tests: a `procs` registry per test that stops every Kafka and kraft
process the test started (also on failure) and, on failure, copies their logs and traces to
out/interop-logs/<test name>/ and names that directory in the report."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_harness import REPO, Procs

_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    if report.failed:  # type: ignore[attr-defined]
        item.stash[_FAILED] = True
    return report


@pytest.fixture
def procs(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Procs]:
    registry = Procs(tmp_path)
    try:
        yield registry
    finally:
        registry.close()
        if request.node.stash.get(_FAILED, False):
            keep = REPO / "out" / "interop-logs" / request.node.name
            shutil.rmtree(keep, ignore_errors=True)
            keep.mkdir(parents=True, exist_ok=True)
            for f in registry.log_files():
                shutil.copy(f, keep / f.name)
            print(f"\ninterop: the processes' logs are kept in {keep}")
