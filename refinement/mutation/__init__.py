"""Mutation campaigns (issue #16): how strong the verification layers are, measured by the
mutants of the pure core (impl/kraft/core) they kill.

- generate: the AST mutator, each mutant a stable id, an operator and a one-splice diff;
- layers: the verification layers run against one mutant (in a subprocess whose PYTHONPATH
  holds the mutated copy of `kraft`), cheapest first;
- execute: one mutant in an isolated copy of impl/kraft, through the layers to the first kill;
- campaign: `kraft mutate`, the Spark job over many mutants, its Parquet and its exit status;
- report: the report page (score per module, per layer, per operator; every survivor's diff);
- equivalent.toml: the mutants accepted as equivalent, by id, each with its reason.
"""
