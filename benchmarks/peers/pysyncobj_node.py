"""One PySyncObj node with a replicated list, driven by JSON lines on stdin.

Run by benchmarks.bench_cluster, three of them on loopback. Commands (one JSON object a line,
one JSON answer a line):

- {"cmd": "status"}: {"leader", "has_leader", "ready"}.
- {"cmd": "closed", "clients", "batch", "warmup_s", "measure_s"}: `clients` calls of
  `append(batch values)` always in flight (each callback sends the next); committed records
  per second and latency percentiles over the window after the warm-up.
- {"cmd": "open", "rate", "batch", "warmup_s", "measure_s"}: calls sent on a fixed schedule at
  `rate` records/s; latency from the scheduled time.
- {"cmd": "probe"}: a call every 5 ms until one succeeds; {"at": wall-clock time of success}.

The load runs in this process because PySyncObj has no client protocol: a @replicated call
made here is forwarded to the leader if this node follows.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable

from pysyncobj import (  # type: ignore[import-untyped]
    FAIL_REASON,
    SyncObj,
    SyncObjConf,
    replicated,
)

RECORD_BYTES = 100


class ReplicatedList(SyncObj):  # type: ignore[misc]
    def __init__(self, me: str, partners: list[str], conf: SyncObjConf) -> None:
        super().__init__(me, partners, conf)
        self.__items: list[bytes] = []

    @replicated  # type: ignore[untyped-decorator]
    def append(self, values: list[bytes]) -> int:
        self.__items.extend(values)
        # Keep memory flat over long runs: the state is the count, the tail proves the order.
        if len(self.__items) > 100_000:
            del self.__items[:-1000]
        return len(values)


def _values(batch: int) -> list[bytes]:
    return [(b"%08d-" % i).ljust(RECORD_BYTES, b"x") for i in range(batch)]


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


class Recorder:
    def __init__(self, batch: int, t0: float, t1: float) -> None:
        self.batch = batch
        self.t0 = t0
        self.t1 = t1
        self.lock = threading.Lock()
        self.done: list[tuple[float, float]] = []
        self.errors = 0

    def callback(
        self, sent: float, then: Callable[[], None] | None
    ) -> Callable[[object, int], None]:
        def cb(_result: object, err: int) -> None:
            now = time.perf_counter()
            with self.lock:
                if err == FAIL_REASON.SUCCESS:
                    self.done.append((now, now - sent))
                else:
                    self.errors += 1
            if then is not None and now < self.t1:
                then()

        return cb

    def result(self) -> dict[str, float]:
        with self.lock:
            window = [lat * 1000 for t, lat in self.done if self.t0 <= t < self.t1]
            errors = self.errors
        return {
            "records_per_s": len(window) * self.batch / (self.t1 - self.t0),
            "p50_ms": _pct(window, 0.5),
            "p99_ms": _pct(window, 0.99),
            "requests": len(window),
            "errors": errors,
        }


def closed(
    obj: ReplicatedList, clients: int, batch: int, warmup_s: float, measure_s: float
) -> dict[str, float]:
    vals = _values(batch)
    t0 = time.perf_counter() + warmup_s
    rec = Recorder(batch, t0, t0 + measure_s)

    def send() -> None:
        obj.append(vals, callback=rec.callback(time.perf_counter(), send))

    for _ in range(clients):
        send()
    time.sleep(warmup_s + measure_s + 0.2)
    return rec.result()


def open_loop(
    obj: ReplicatedList, rate: float, batch: int, warmup_s: float, measure_s: float
) -> dict[str, float]:
    vals = _values(batch)
    start = time.perf_counter()
    t0 = start + warmup_s
    rec = Recorder(batch, t0, t0 + measure_s)
    interval = batch / rate
    total = int((warmup_s + measure_s) / interval)
    i = 0
    while i < total:
        now = time.perf_counter()
        while i < total and start + i * interval <= now:
            obj.append(vals, callback=rec.callback(start + i * interval, None))
            i += 1
        time.sleep(max(0.0, start + i * interval - time.perf_counter()))
    time.sleep(1.0)
    return rec.result()


def probe(obj: ReplicatedList) -> dict[str, float]:
    got = threading.Event()
    at: list[float] = []

    def cb(_result: object, err: int) -> None:
        if err == FAIL_REASON.SUCCESS and not got.is_set():
            at.append(time.time())
            got.set()

    vals = _values(1)
    while not got.wait(0.005):
        obj.append(vals, callback=cb)
    return {"at": at[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--self", dest="me", required=True)
    parser.add_argument("--election-timeout-ms", type=int, default=500)
    parser.add_argument("partners", nargs="+")
    args = parser.parse_args()
    e = args.election_timeout_ms / 1000
    # Election timeout drawn from [E, 2E], as kraft draws it.
    conf = SyncObjConf(raftMinTimeout=e, raftMaxTimeout=2 * e, appendEntriesPeriod=min(0.1, e / 4))
    obj = ReplicatedList(args.me, args.partners, conf)
    for line in sys.stdin:
        cmd = json.loads(line)
        name = cmd["cmd"]
        answer: dict[str, object]
        if name == "status":
            answer = {
                "leader": bool(obj._isLeader()),
                "has_leader": obj._getLeader() is not None,
                "ready": bool(obj.isReady()),
            }
        elif name == "closed":
            answer = dict(
                closed(obj, cmd["clients"], cmd["batch"], cmd["warmup_s"], cmd["measure_s"])
            )
        elif name == "open":
            answer = dict(
                open_loop(obj, cmd["rate"], cmd["batch"], cmd["warmup_s"], cmd["measure_s"])
            )
        elif name == "probe":
            answer = dict(probe(obj))
        else:
            answer = {"error": f"unknown command {name!r}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    obj.destroy()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
