"""Starting Spark quietly: JVM output goes to a log file, Spark logs at ERROR only.

``local[*]`` by default; any master a user has, e.g. a standalone ``spark://host:port``
(the checks are plain DataFrame code, the same on a cluster), or a Spark Connect server
(``sc://host:port``), whose JVM is already warm. An already running session (a test
suite's) is reused and left running. The checks use the DataFrame API only, which Spark
Connect has; it has no SparkContext, so job counts are known on a classic session only.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from .classarchive import ClassArchive, class_archive
from .interrupt import end_jvm, held_sigint, quiet_py4j, spark_context

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
    archive: ClassArchive | None = None  # the class archive its JVM writes as it exits, if any
    jvm: subprocess.Popen | None = None  # the local JVM started here, if any

    def stop(self, interrupted: bool = False) -> None:
        """Stop a session started here. ``interrupted`` (Ctrl-C): nothing of it is wanted any
        more, so its JVM is ended and waited for now instead of asked to stop, and the class
        archive it was to write as it exits is given up (an interrupted dump is of no use)."""
        if not self.owned:
            return
        if interrupted and self.jvm is not None:
            end_jvm(self.jvm, self.archive)
            return
        try:
            self.spark.stop()
        except KeyboardInterrupt:  # Ctrl-C as the check ended: the JVM goes with the command
            if self.jvm is not None:
                end_jvm(self.jvm, self.archive)
            raise
        except Exception:
            if not interrupted:
                raise


def _is_local(master: str) -> bool:
    return master.startswith("local")


_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?")
_CONNECT = re.compile(r"sc://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>\d{1,5}))?/?(?:;.*)?")


def local_cores(master: str) -> int | None:
    """The cores of a ``local``, ``local[N]`` or ``local[*]`` master; None for any other."""
    match = _LOCAL.fullmatch(master.strip())
    if match is None:
        return None
    n = match.group(1)
    if n is None:
        return 1  # plain "local": one thread
    return (os.cpu_count() or 1) if n == "*" else int(n)


def connect_address(url: str) -> tuple[str, int]:
    """Host and port of a Spark Connect URL ``sc://host[:port]``; ValueError names what is wrong."""
    match = _CONNECT.fullmatch(url.strip())
    if match is None:
        raise ValueError(f"--connect {url!r}: expected sc://host:port (e.g. sc://127.0.0.1:15002)")
    port = int(match.group("port") or 15002)
    if not 0 < port < 65536:
        raise ValueError(f"--connect {url!r}: port {port} is out of range")
    return match.group("host").strip("[]"), port


def connect(url: str, timeout_s: float = 3.0) -> SparkHandle:
    """A client session of the Spark Connect server at ``url``; the server keeps running."""
    host, port = connect_address(url)
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as exc:
        raise SparkStartError(
            f"no Spark Connect server at {host}:{port} ({exc.strerror or exc}); "
            "start one with `joynr-sim spark start`"
        ) from None
    try:
        spark = SparkSession.builder.remote(url.strip()).getOrCreate()
        _ = spark.version  # one round trip: the server answers as Spark Connect
    except Exception as exc:
        raise SparkStartError(f"{host}:{port} does not answer as Spark Connect: {_first_line(exc)}") from None
    return SparkHandle(spark, owned=True, jvm_pid=None, jvm_log=None)


def is_connect(spark: SparkSession) -> bool:
    return not hasattr(spark, "sparkContext") or type(spark).__module__.startswith("pyspark.sql.connect")


def cores(spark: SparkSession) -> int | None:
    """The cores that run tasks: the default parallelism, or a Connect server's local master."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    try:
        return local_cores(spark.conf.get("spark.master", "") or "")
    except Exception:  # a server that does not tell: leave its settings alone
        return None


def tune(spark: SparkSession) -> None:
    """Settings of every check run, on any session.

    Adaptive query execution off: it submits every query stage as a Spark job of its own
    (a check run cost 70-98 jobs, most of them such stages), and its re-planning between
    stages buys nothing on tables this size; without it a query is one job (plus one per
    broadcast, see below). Measured on 100k synthetic events
    (load average 10-14): 82 jobs and 99 s with it, 29 jobs and 61 s without. So shuffle
    partitions are the cores (nothing merges small ones any more), not 200.
    """
    n = cores(spark)
    if n:
        spark.conf.set("spark.sql.shuffle.partitions", str(n))
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    spark.conf.unset("spark.sql.files.minPartitionNum")  # see partition_for()
    # No join is broadcast, not even of a small scan: each broadcast is a job (see
    # CheckContext.small).
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    # A small input's run must leave neither off (see partition_for): the next run's reading
    # pass, before partition_for sizes that run, would otherwise be interpreted. Left on
    # NO_CODEGEN after a 20k warm-up, the reading pass of 1M events cost the JVM 96 s of CPU.
    spark.conf.unset("spark.sql.codegen.wholeStage")
    spark.conf.unset("spark.sql.codegen.factoryMode")
    # A collect with a limit at its root (a check's few rows, computed once) reads every
    # partition in its first job, not one first and the rest in a second.
    spark.conf.set("spark.sql.limit.initialNumPartitions", "1024")


SMALL_INPUT = 50_000  # events a check run takes in one partition
SMALL_TRACE_BYTES = SMALL_INPUT * 400  # about as many trace bytes (the demo library: 376 a line)

# A short local check run is mostly a fresh JVM warming up: its optimising (C2) compiler and
# parallel collector threads compete with the task threads for the same few cores, for code
# that runs a few seconds at most. Demo library, cold, 2 cores at load 6-9: 110-122 s with
# the defaults, 75 s with these (reading 34-46 -> 27 s, checks 55-60 -> 36 s).
# The quick compiler alone gets a code cache of 48 MB, which a warm Connect server (these
# options too) fills within a few checks: every check's queries bring new classes. Full, the
# JVM's sweeper thread flushes compiled code that is then compiled again: after about ten
# demo-library checks the sweeper had taken 21.3 s of CPU and the compiler 19.0 s. With
# 240 MB (the size the JVM reserves when both compilers run) five checks left 59 MB used,
# no sweeper time and 6.3 s in the compiler; the server's CPU per check 21 -> 17-19 s, the
# wall time the same within this machine's noise (15-16 s at load 2).
SHORT_RUN_JVM = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:ReservedCodeCacheSize=240m")
# A long local check run (a large input) keeps the optimising compiler, which its tasks
# need: with the quick compiler only, 1M synthetic events took 1.8x as long to check (and
# 3.5x to parse). It collects garbage with the parallel collector instead of G1, whose
# concurrent marking threads took 3-5 s of the JVM's CPU per check phase beside the tasks
# on 2 cores. 1M synthetic events on local[2], two warm rounds each, one JVM per setting
# (load 3-4): check 69.2 and 65.9 s (JVM CPU 133 and 125 s) with G1, 61.3 and 57.7 s (115
# and 107 s) with the parallel collector; the parse floor 5.7 and 5.5 s, 4.0 and 4.1 s.
LONG_RUN_JVM = ("-XX:+UseParallelGC",)


def jvm_options(master: str, short_run: bool) -> list[str]:
    """The driver JVM's options for a check run: only a local master's JVM is ours to tune."""
    if not _is_local(master):
        return []
    return list(SHORT_RUN_JVM if short_run else LONG_RUN_JVM)


def partition_for(spark: SparkSession, events: int) -> bool:
    """Partitions and code generation of a check run by its input; True for a small one.

    A small input (under ``SMALL_INPUT`` events) is checked in one partition, scans
    included: a check run's query is some 80 stages whose tasks run for milliseconds, so a
    second task per stage doubled scheduling, not work (demo library, 11,895 events: tasks
    251 -> 132, the JVM's CPU time a fifth less). A larger input keeps a partition per
    core. Neither broadcasts (``tune``, ``CheckContext.small``).
    A small input's queries are also interpreted, not compiled to Java (whole-stage code
    generation off): compiling some 80 stages with Janino cost more than running them on
    12k events (demo library, cold, with ``SHORT_RUN_JVM``: checks 36 -> 30 s, load 8-9).
    Nor are its single expressions (projections, predicates, orderings): every one
    compiled is a new class for Janino and then the JVM's JIT to compile again, on every
    check run, even on a warm JVM. On a warm local JVM with ``SHORT_RUN_JVM`` (the Connect
    server's, see ``analytics.server``), the demo library's check run cost the JVM 16-23 s
    of CPU with them compiled and 9-10 s interpreted (second to fourth run of one JVM).
    ``spark.sql.codegen.factoryMode`` is an internal setting of Spark's (its own tests use
    it); the synthetic answer key and the demo library give the same results with it.
    """
    small = events < SMALL_INPUT
    n = 1 if small else cores(spark)
    if n:
        spark.conf.set("spark.sql.shuffle.partitions", str(n))
    if small:
        spark.conf.set("spark.sql.files.minPartitionNum", "1")
        spark.conf.set("spark.sql.codegen.wholeStage", "false")
        spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    else:
        spark.conf.unset("spark.sql.files.minPartitionNum")
        spark.conf.unset("spark.sql.codegen.wholeStage")
        spark.conf.unset("spark.sql.codegen.factoryMode")
    return small


_CALL_SITE = ("callSite.short", "callSite.long")  # Spark's CallSite.SHORT_FORM and LONG_FORM


class JobMeter:
    """Counts the Spark jobs and tasks run inside ``with``: a job group and the status tracker.

    On Spark Connect there is no status tracker: ``jobs`` and ``tasks`` stay None.
    """

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.jobs: int | None = None
        self.tasks: int | None = None
        self._group = f"joynr-sim-check-{uuid.uuid4().hex}"

    def __enter__(self) -> JobMeter:
        if not is_connect(self.spark):
            sc = self.spark.sparkContext
            sc.setJobGroup(self._group, "joynr-sim check")
            # Every RDD a query plans names its creation site, which Spark finds by walking
            # the driver thread's stack (deep in Catalyst) and matching each frame, unless
            # the thread names one itself. Profiled on a cold demo check (JFR, 1,889
            # samples): 32 samples in that walk, 3% of the driver's.
            for prop in _CALL_SITE:
                sc.setLocalProperty(prop, "joynr-sim check")
        return self

    def __exit__(self, *exc) -> None:
        if is_connect(self.spark):
            return
        sc = self.spark.sparkContext
        sc.setLocalProperty("spark.jobGroup.id", None)
        sc.setLocalProperty("spark.job.description", None)
        for prop in _CALL_SITE:
            sc.setLocalProperty(prop, None)
        tracker = sc.statusTracker()
        ids = tracker.getJobIdsForGroup(self._group)
        tasks = 0
        for job in ids:
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                stage_info = tracker.getStageInfo(stage)
                tasks += stage_info.numTasks if stage_info else 0
        self.jobs, self.tasks = len(ids), tasks


def start(
    master: str = "local[*]",
    work_dir: Path | None = None,
    driver_memory: str | None = None,
    shuffle_partitions: int | None = None,
    short_run: bool = False,
) -> SparkHandle:
    """The active session if there is one, else a new one with quiet logging.

    ``short_run`` (a local master and a small input, see ``SMALL_TRACE_BYTES``): the JVM
    compiles with its quick compiler only and collects garbage in one thread
    (``SHORT_RUN_JVM``), and maps Spark's classes from the class archive, or has its JVM
    write it as it exits (``analytics.classarchive``). A JVM that does not come up with an
    archive is started once more without it, and the archive is deleted. A long local run
    keeps both compilers and collects with the parallel collector (``LONG_RUN_JVM``).
    """
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    quiet_py4j()
    active = SparkSession.getActiveSession()
    if active is not None:
        return SparkHandle(active, owned=False, jvm_pid=_jvm_pid(), jvm_log=None)

    # Only a new JVM takes the archive's options: with one running in this process already,
    # pyspark keeps using it and would ignore (and leak) a JVM started here.
    fresh = SparkContext._gateway is None
    archive = class_archive() if short_run and _is_local(master) and fresh else None
    try:
        return _start(master, work_dir, driver_memory, shuffle_partitions, short_run, archive)
    except SparkStartError:
        if archive is None:
            raise
        archive.discard()
        return _start(master, work_dir, driver_memory, shuffle_partitions, short_run, None)


def _start(
    master: str,
    work_dir: Path | None,
    driver_memory: str | None,
    shuffle_partitions: int | None,
    short_run: bool,
    archive: ClassArchive | None,
) -> SparkHandle:
    conf = SparkConf().setMaster(master).setAppName("joynr-sim check")
    conf.set("spark.ui.enabled", "false")
    conf.set("spark.ui.showConsoleProgress", "false")
    conf.set("spark.sql.session.timeZone", "UTC")
    conf.set("spark.sql.adaptive.enabled", "false")  # see tune()
    if shuffle_partitions is None and local_cores(master):
        shuffle_partitions = local_cores(master)  # tune() sizes a cluster's once it runs
    if shuffle_partitions is not None:
        conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if driver_memory:
        conf.set("spark.driver.memory", driver_memory)
    driver_opts = jvm_options(master, short_run)
    if archive is not None:
        driver_opts += archive.java_options()
    jvm_log = None
    popen_kwargs = None
    if work_dir is not None:
        if archive is not None:  # a JVM an archive aborts reports it here, not in the caller's folder
            driver_opts.append(f"-XX:ErrorFile={work_dir / 'hs_err_pid%p.log'}")
        props = work_dir / "log4j2.properties"
        props.write_text(_LOG4J2)
        driver_opts.append(f"-Dlog4j2.configurationFile=file:{props}")
        conf.set("spark.executor.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{props}")
        jvm_log = work_dir / "jvm.log"
        log_file = open(jvm_log, "ab")  # the JVM child keeps its own descriptor
        popen_kwargs = {"stdout": log_file, "stderr": log_file}
    if driver_opts:
        conf.set("spark.driver.extraJavaOptions", " ".join(driver_opts))
    if _is_local(master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    gateway = None
    with held_sigint() as interrupted:
        try:
            from pyspark.java_gateway import launch_gateway

            gateway = launch_gateway(conf, popen_kwargs=popen_kwargs)
            if archive is not None:  # the JVM is left alone: it writes the archive when this process ends
                archive.writer_started(getattr(getattr(gateway, "proc", None), "pid", None))
            sc = spark_context(conf, gateway)
            # the session too is made while Ctrl-C is held: one arriving here (making it loads
            # Spark SQL, seconds on a loaded machine) would leave the JVM to end with the process
            sc.setLogLevel("ERROR")
            spark = SparkSession(sc)
        except KeyboardInterrupt:  # pyspark's own handler, inside SparkContext: as below
            interrupted.append(True)
        except Exception as exc:  # the JVM did not come up: say so without its stack trace
            hint = f"; the JVM said: {_tail(jvm_log)}" if jvm_log and _tail(jvm_log) else ""
            raise SparkStartError(
                f"could not start Spark with master {master!r} "
                f"(Java 17 or 21 needed): {_first_line(exc)}{hint}"
            ) from None
        finally:
            if popen_kwargs:
                popen_kwargs["stdout"].close()
    if interrupted:  # Ctrl-C while the JVM came up: it goes with the command, its archive unwritten
        proc = getattr(gateway, "proc", None)
        if proc is not None:
            end_jvm(proc)
        if archive is not None and archive.writing is not None:  # a mapped archive stays
            archive.discard()
        raise KeyboardInterrupt
    writing = archive if archive is not None and archive.writing is not None else None
    return SparkHandle(spark, owned=True, jvm_pid=_jvm_pid(), jvm_log=jvm_log, archive=writing,
                       jvm=getattr(gateway, "proc", None))


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
