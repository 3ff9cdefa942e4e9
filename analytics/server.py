"""``joynr-sim spark start|stop|status``: a warm Spark Connect server on loopback.

Spark's JVM takes seconds to start and more to warm up; a check of a small run pays that
every time. A Connect server started once keeps one JVM warm, and ``joynr-sim check
--connect sc://127.0.0.1:PORT`` sends it the same DataFrame queries. The server is
pyspark's own ``sbin/start-connect-server.sh``, bound to 127.0.0.1, with its pid file and
log in ``$XDG_CACHE_HOME/joynr-sim/spark`` (default ``~/.cache/joynr-sim/spark``); stop
ends only the process that pid file names, and only if it is that server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .cache import cache_root

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
IDENT = "joynr-sim"
DEFAULT_PORT = 15002


class ServerError(Exception):
    """The server could not be started or stopped; ``status`` is the exit status to use."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Server:
    pid: int
    port: int

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def state_dir() -> Path:
    return cache_root() / "spark"


def _pid_file(state: Path) -> Path:
    # The name spark-daemon.sh gives it, so its own "already running" guard sees ours.
    return state / f"spark-{IDENT}-{SERVER_CLASS}-1.pid"


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _is_server(pid: int) -> bool:
    """Whether ``pid`` is alive and is a Spark Connect server (not a pid reused since)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return SERVER_CLASS.encode() in cmdline


def running(state: Path | None = None) -> Server | None:
    state = state or state_dir()
    try:
        pid = int(_pid_file(state).read_text().strip())
        port = int(json.loads((state / "server.json").read_text())["port"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return Server(pid, port) if _is_server(pid) else None


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def start(port: int = DEFAULT_PORT, master: str = "local[*]", driver_memory: str | None = None,
          timeout_s: float = 120.0, state: Path | None = None, quick_jit: bool = True) -> Server:
    """Starts the server and waits until it accepts connections.

    ``quick_jit``: the server's JVM compiles with its quick (C1) compiler only and collects
    garbage in one thread (``session.SHORT_RUN_JVM``), as a short local check run does. The
    server is there for small inputs, whose check runs are short and each plans new
    queries: on a local JVM with the optimising (C2) compiler, as the server's was, its
    threads were still compiling during the fourth check of the demo library (8.6 of the
    JVM's 19 s of CPU for that run), on the same two cores as the tasks. A server meant
    for large inputs, whose tasks run long enough to repay C2, passes False.
    """
    state = state or state_dir()
    if not 0 < port < 65536:
        raise ServerError(f"--port {port}: expected 1..65535", 2)
    found = running(state)
    if found is not None:
        raise ServerError(f"a Spark Connect server is already running: {found.url} (pid {found.pid}); "
                          "stop it with `joynr-sim spark stop`", 1)
    if not _port_free(port):
        raise ServerError(f"port {port} on 127.0.0.1 is in use; choose another with --port", 3)
    logs = state / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    _pid_file(state).unlink(missing_ok=True)  # a stale one: its process is gone (checked above)
    (state / "server.json").write_text(json.dumps({"port": port, "master": master}))
    props = state / "log4j2.properties"
    props.write_text("rootLogger.level = warn\nrootLogger.appenderRef.stderr.ref = console\n"
                     "appender.console.type = Console\nappender.console.name = console\n"
                     "appender.console.target = SYSTEM_ERR\nappender.console.layout.type = PatternLayout\n"
                     "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n\n")
    home = _spark_home()
    from .session import SHORT_RUN_JVM, local_cores

    cores = local_cores(master)
    java_opts = [*(SHORT_RUN_JVM if quick_jit else ()), f"-Dlog4j2.configurationFile=file:{props}"]
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "false",  # see session.tune
        "spark.driver.extraJavaOptions": " ".join(java_opts),
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    if cores:
        confs["spark.sql.shuffle.partitions"] = str(cores)
    if driver_memory:
        confs["spark.driver.memory"] = driver_memory
    args = [str(home / "sbin" / "start-connect-server.sh"), "--master", master]
    for key, value in confs.items():
        args += ["--conf", f"{key}={value}"]
    env = dict(os.environ, SPARK_HOME=str(home), SPARK_PID_DIR=str(state), SPARK_LOG_DIR=str(logs),
               SPARK_IDENT_STRING=IDENT, SPARK_LOCAL_IP="127.0.0.1")
    try:
        # A Ctrl-C in the script too: spark-daemon.sh has the server running (and its pid
        # file written) before the script returns.
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ServerError(f"start-connect-server.sh failed: {(done.stderr or done.stdout).strip()[:300]}", 3)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                pid = int(_pid_file(state).read_text().strip())
            except (OSError, ValueError):
                pid = None
            if pid is not None and not _is_server(pid):
                raise ServerError(f"the Spark Connect server exited while starting; see {_log(logs)}", 3)
            if pid is not None and _answers(port):
                return Server(pid, port)
            time.sleep(0.25)
    except KeyboardInterrupt:  # Ctrl-C: the server half started goes with the command
        try:
            stop(state=state)
        except ServerError:  # its pid file not written yet: nothing of it to find
            pass
        raise
    raise ServerError(f"the Spark Connect server did not listen on port {port} within {timeout_s:.0f} s; "
                      f"see {_log(logs)} (stop it with `joynr-sim spark stop`)", 3)


def stop(timeout_s: float = 30.0, state: Path | None = None) -> Server:
    """Stops the server this module started: SIGTERM, then SIGKILL after ``timeout_s``."""
    state = state or state_dir()
    found = running(state)
    if found is None:
        _pid_file(state).unlink(missing_ok=True)  # names no live server (ours, if any)
        raise ServerError("no Spark Connect server is running (nothing to stop)", 1)
    os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _is_server(found.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _is_server(found.pid):
        os.kill(found.pid, signal.SIGKILL)
    _pid_file(state).unlink(missing_ok=True)
    return found


def _log(logs: Path) -> Path:
    outs = sorted(logs.glob(f"spark-{IDENT}-*.out"), key=lambda p: p.stat().st_mtime)
    return outs[-1] if outs else logs
