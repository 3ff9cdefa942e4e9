"""Starting Spark quietly: JVM output goes to a log file, Spark logs at ERROR only.

``local[*]`` by default; any master a user has (the checks are plain DataFrame code, the
same on a cluster). An already running session (a test suite's) is reused and left running.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


class SparkStartError(Exception):
    """Spark could not start; the message says where the JVM's own output went."""


@dataclass
class SparkHandle:
    spark: SparkSession
    owned: bool  # started here, so stopped here
    jvm_pid: int | None
    jvm_log: Path | None

    def stop(self) -> None:
        if self.owned:
            self.spark.stop()


def _is_local(master: str) -> bool:
    return master.startswith("local")


def start(
    master: str = "local[*]",
    work_dir: Path | None = None,
    driver_memory: str | None = None,
    shuffle_partitions: int | None = None,
) -> SparkHandle:
    """The active session if there is one, else a new one with quiet logging."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    active = SparkSession.getActiveSession()
    if active is not None:
        return SparkHandle(active, owned=False, jvm_pid=_jvm_pid(), jvm_log=None)

    conf = SparkConf().setMaster(master).setAppName("joynr-sim check")
    conf.set("spark.ui.enabled", "false")
    conf.set("spark.ui.showConsoleProgress", "false")
    conf.set("spark.sql.session.timeZone", "UTC")
    conf.set("spark.sql.adaptive.enabled", "true")
    if shuffle_partitions is None and _is_local(master):
        shuffle_partitions = 8  # small traces: 200 tiny shuffle tasks cost more than the work
    if shuffle_partitions is not None:
        conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if driver_memory:
        conf.set("spark.driver.memory", driver_memory)
    jvm_log = None
    popen_kwargs = None
    if work_dir is not None:
        props = work_dir / "log4j2.properties"
        props.write_text(_LOG4J2)
        conf.set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{props}")
        conf.set("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{props}")
        jvm_log = work_dir / "jvm.log"
        log_file = open(jvm_log, "ab")  # the JVM child keeps its own descriptor
        popen_kwargs = {"stdout": log_file, "stderr": log_file}
    if _is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    try:
        from pyspark.java_gateway import launch_gateway

        gateway = launch_gateway(conf, popen_kwargs=popen_kwargs)
        sc = SparkContext(conf=conf, gateway=gateway)
    except Exception as exc:  # the JVM did not come up: say so without its stack trace
        hint = f"; the JVM said: {_tail(jvm_log)}" if jvm_log and _tail(jvm_log) else ""
        raise SparkStartError(
            f"could not start Spark with master {master!r} "
            f"(Java 17 or 21 needed): {_first_line(exc)}{hint}"
        ) from None
    finally:
        if popen_kwargs:
            popen_kwargs["stdout"].close()
    sc.setLogLevel("ERROR")
    spark = SparkSession(sc)
    return SparkHandle(spark, owned=True, jvm_pid=_jvm_pid(), jvm_log=jvm_log)


def _jvm_pid() -> int | None:
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    return getattr(proc, "pid", None)


def _tail(log: Path, lines: int = 3) -> str:
    """The last lines the JVM wrote, without stack frames: the part a user can act on."""
    try:
        text = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    useful = [t.strip() for t in text if t.strip() and not t.lstrip().startswith("at ")]
    return " | ".join(useful[-lines:])[:500]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]
