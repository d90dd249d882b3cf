"""Spark simulation campaigns: many seeded simulator runs, their events, coverage, timing
distributions and violations as Parquet datasets, and an HTML report.

Modules: seedrun (one run, executor side, no Spark), spark (sessions, code shipping, a
loopback standalone cluster), schemas, aggregate, campaign (the command), report, mutants.
"""
