"""A local[2] Spark session shared by the pipeline tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from refinement.pipeline.spark import session


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    s = session("local[2]", app_name="kraft-pipeline-tests", shuffle_partitions=4)
    yield s
    s.stop()
