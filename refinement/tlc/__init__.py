"""The TLC model checker, run as a subprocess, and what it reports.

- run: where the jar, java and the specs are; one run of a spec with a config;
- output: TlcResult and the parser of TLC's -tool output;
- config: reading a TLC config;
- models: the registry of models under spec/models and spec/mutants (its convention is in that
  module's docstring) and checking one;
- cli: `python -m refinement.tlc check-all | table | list`.
"""

from refinement.tlc.cli import main, write_table
from refinement.tlc.config import config_constants
from refinement.tlc.models import (
    MODEL_DIRS,
    Model,
    ModelKind,
    check_model,
    load_model,
    load_models,
    select_models,
)
from refinement.tlc.output import ErrorKind, TlcError, TlcResult, parse_tlc_output
from refinement.tlc.run import REPO_ROOT, SPEC_DIR, find_tla_jar, run_tlc

__all__ = [
    "MODEL_DIRS",
    "REPO_ROOT",
    "SPEC_DIR",
    "ErrorKind",
    "Model",
    "ModelKind",
    "TlcError",
    "TlcResult",
    "check_model",
    "config_constants",
    "find_tla_jar",
    "load_model",
    "load_models",
    "main",
    "parse_tlc_output",
    "run_tlc",
    "select_models",
    "write_table",
]
