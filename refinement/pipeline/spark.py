"""Where campaigns run: the Spark session, shipping the project to executors, and a
loopback standalone cluster (master + worker) for tests and single-machine use.

The session is quiet (log level ERROR from JVM start, no UI) and its Python workers use this
interpreter, so executors import the same `kraft` and `refinement` as the driver. On a
cluster whose workers do not share this checkout, `ship_code` zips both packages on the fly
and adds the zip to every executor's sys.path (ahead of any installed copy).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from refinement.accel import CHECKOUT_ENV, checkout_root

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# PySpark sets the shell's level from this logger (and says so unless it matches the root's).
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def spark_env() -> None:
    """The environment every session needs, set before a JVM starts."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


def _quiet_conf_dir() -> str:
    """A SPARK_CONF_DIR whose log4j2.properties logs errors only (spark-class puts the conf
    dir on the JVM's classpath, so it applies from the first line the JVM logs)."""
    conf_dir = Path(tempfile.gettempdir()) / "kraft-campaign-spark-conf"
    conf_dir.mkdir(exist_ok=True)
    path = conf_dir / "log4j2.properties"
    if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J2:
        path.write_text(_LOG4J2, encoding="utf-8")
    return str(conf_dir)


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "kraft-campaign",
    shuffle_partitions: int = 8,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """Start (or join) a Spark session on `master`, quiet and UI-less."""
    spark_env()
    from pyspark.sql import SparkSession

    # A conf dir the user chose is theirs (and so are its log settings).
    os.environ.setdefault("SPARK_CONF_DIR", _quiet_conf_dir())
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.pyspark.python", sys.executable)
        .config("spark.driver.host", os.environ["SPARK_LOCAL_IP"])
        .config("spark.python.worker.reuse", "true")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    # Executors running a shipped zip find the specs and the TLA+ jar (for trace validation)
    # in this checkout, on storage they share with the driver as --out already requires.
    root = checkout_root()
    if root is not None:
        builder = builder.config(f"spark.executorEnv.{CHECKOUT_ENV}", str(root))
    jar = os.environ.get("TLA_JAR_PATH")  # else refinement.tlc finds it in the checkout
    if jar:
        builder = builder.config("spark.executorEnv.TLA_JAR_PATH", jar)
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def project_roots() -> tuple[Path, Path]:
    """The directories holding the `kraft` and `refinement` packages being run."""
    import kraft
    import refinement

    kraft_init = kraft.__file__
    refinement_init = refinement.__file__
    assert kraft_init is not None and refinement_init is not None
    return Path(kraft_init).parent, Path(refinement_init).parent


def build_code_zip(dest_dir: Path) -> Path:
    """A zip of the `kraft` and `refinement` packages (sources only) for executors."""
    dest = dest_dir / "kraft-project.zip"
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for root in project_roots():
            for path in sorted(root.rglob("*")):
                if "__pycache__" in path.parts or not path.is_file():
                    continue
                if path.suffix in (".py", ".typed"):
                    zf.write(path, Path(root.name) / path.relative_to(root))
    return dest


def ship_code(spark: SparkSession, work_dir: Path) -> Path:
    """Make executors import this checkout of the project from a zip."""
    work_dir.mkdir(parents=True, exist_ok=True)
    zip_path = build_code_zip(work_dir)
    spark.sparkContext.addPyFile(str(zip_path))
    return zip_path


@contextmanager
def campaign_session(master: str, ship: str, *, app_name: str) -> Iterator[SparkSession]:
    """A session for one campaign run from the command line, stopped at the end; this
    checkout's code is shipped to the executors when `ship` is "yes", or "auto" on a cluster
    (local executors import it from the checkout)."""
    spark = session(master, app_name=app_name)
    try:
        if ship == "yes" or (ship == "auto" and not is_local(master)):
            ship_code(spark, Path(tempfile.mkdtemp(prefix="kraft-ship-")))
        yield spark
    finally:
        spark.stop()


# --------------------------------------------------------------------------- standalone


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def spark_class() -> Path:
    """bin/spark-class of the pip-installed PySpark."""
    import pyspark

    init = pyspark.__file__
    assert init is not None
    return Path(init).parent / "bin" / "spark-class"


@dataclass
class StandaloneCluster:
    """A master and one worker on 127.0.0.1, each in its own process group."""

    master_url: str
    processes: list[subprocess.Popen[bytes]]
    log_dir: Path

    def stop(self) -> None:
        for proc in reversed(self.processes):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        deadline = time.monotonic() + 15
        for proc in self.processes:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _wait_for_line(log: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and needle in log.read_text(encoding="utf-8", errors="replace"):
            return
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    tail = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(f"standalone Spark: {needle!r} not seen in {log}:\n{tail}")


@contextmanager
def standalone_cluster(
    *, cores: int = 1, memory: str = "1g", log_dir: Path | None = None, timeout: float = 90.0
) -> Iterator[StandaloneCluster]:
    """Start a master and a worker (spark-class, loopback, free ports); stop both on exit,
    whatever happens inside."""
    spark_env()
    logs = log_dir or Path(tempfile.mkdtemp(prefix="kraft-standalone-"))
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env["SPARK_LOG_DIR"] = str(logs)
    env.pop("SPARK_CONF_DIR", None)  # the daemons log at INFO: readiness is read from it
    env["SPARK_WORKER_DIR"] = str(logs / "work")
    port, master_ui, worker_ui = free_port(), free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    cls = str(spark_class())
    commands = [
        [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
         "--port", str(port), "--webui-port", str(master_ui)],
        [cls, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
         "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_ui)],
    ]  # fmt: skip
    cluster = StandaloneCluster(url, [], logs)
    try:
        for name, cmd, ready in zip(
            ("master", "worker"),
            commands,
            ("Starting Spark master", "Successfully registered with master"),
            strict=True,
        ):
            log = logs / f"{name}.log"
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            cluster.processes.append(proc)
            _wait_for_line(log, ready, proc, timeout)
        yield cluster
    finally:
        cluster.stop()
