"""Workloads for peer systems measured beside kraft (benchmarks.bench_cluster)."""
