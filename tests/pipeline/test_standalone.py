"""A campaign on a real standalone Spark cluster (master + worker on loopback), driven
through the command line, with the project shipped to the executor as a zip."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from refinement.pipeline.spark import build_code_zip, standalone_cluster

pytestmark = pytest.mark.spark
REPO = Path(__file__).resolve().parents[2]


def test_code_zip_holds_both_packages(tmp_path):
    names = set(zipfile.ZipFile(build_code_zip(tmp_path)).namelist())
    assert "kraft/core/replica.py" in names
    assert "refinement/sim.py" in names
    assert "refinement/pipeline/seedrun.py" in names
    assert not any("__pycache__" in n for n in names)


def test_campaign_on_a_standalone_cluster(tmp_path):
    out = tmp_path / "standalone"
    with standalone_cluster(cores=1, memory="1g", log_dir=tmp_path / "logs") as cluster:
        assert cluster.master_url.startswith("spark://127.0.0.1:")
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
        proc = subprocess.run(
            [sys.executable, "-m", "kraft.cli", "campaign", "--master", cluster.master_url,
             "--ship-code", "yes", "--seeds", "3", "--events", "300", "--profile", "crashes",
             "--partitions", "2", "--out", str(out), "--no-progress", "--no-report",
             "--trace-samples", "1"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=240, check=False,
        )  # fmt: skip
        workers = list((tmp_path / "logs" / "work").glob("app-*"))
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "campaign" in proc.stdout and "failing runs: 0" in proc.stdout
    # The executor ran on the worker (its app directory), not in the driver.
    assert workers, "no application ran on the worker"
    seeds = pd.read_parquet(out / "seeds")
    assert sorted(seeds["seed"]) == [0, 1, 2]
    assert (seeds["profile"] == "crashes").all() and seeds["ok"].all()
    assert seeds["crashes"].sum() > 0
    events = pd.read_parquet(out / "events")
    assert len(events) == seeds["trace_events"].sum()
    # The earmarked trace was validated by TLC on the executor, which ran the shipped zip
    # and found the specs and the jar in the checkout.
    samples = pd.read_parquet(out / "aggregates" / "trace_samples")
    assert len(samples) == 1
    assert samples["validation"][0].startswith("accepted by TLC"), samples["validation"][0]
    # Every cluster process was stopped on leaving the context.
    assert all(p.poll() is not None for p in cluster.processes)
