"""A Jepsen-style fault harness for a real kraft cluster on 127.0.0.1 (`kraft chaos`).

- schedule.py: the seeded fault schedule (a pure function of the seed).
- procs.py: the `kraft start` processes: format, start, SIGKILL, SIGSTOP/SIGCONT, and the
  crash that drops a node's un-fsynced log tail (never below what it fsynced).
- probe.py: the test-only fsync journal the nodes run under (what each fsync made durable).
- proxy.py: one loopback TCP proxy per directed link (drop, delay, lose, cut, refuse).
- writers.py: concurrent writers and their history (ack, refused, unknown per attempt).
- verdict.py: the logs read back with kraft's own reader, judged against the history.
- runner.py: one run, cycle by cycle; report.py: its configuration, cycle records and report;
  cli.py: the command line.
"""
