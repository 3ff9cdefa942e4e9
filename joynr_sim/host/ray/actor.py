"""The Ray actor that holds one host process on a node of the cluster (``HostActor``).

Ray places the actor, starts it and reports its death; the actor starts the same host
process a local run forks (``python -m joynr_sim.host``) on its node, its two channels
TCP connections the runner makes to the node. So Ray carries control (place, start,
signal, wait), and the runner's requests go to the host over its own sockets as they do
on this machine: a call costs no Ray round trip. A connection counts only after it sent
the token the runner gave the actor over Ray; anything else that connects first is closed.

The host is the actor's child with the parent-death signal armed (``process.entry``): when
Ray kills the actor, or its worker process dies, the host dies with it.
"""

from __future__ import annotations

import hmac
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ACCEPT_TIMEOUT_S = 30.0  # for the runner to connect both channels once the actor listens
TOKEN_BYTES = 16
_SOURCE_ROOT = str(Path(__file__).resolve().parents[3])  # the directory holding joynr_sim


class HostActor:
    """One host process on the node this actor was placed on."""

    def __init__(self) -> None:
        self._listeners: list[socket.socket] = []
        self._process: subprocess.Popen | None = None

    def listen(self) -> dict:
        """Two listening sockets on the node's address (as Ray knows it): where to connect."""
        import ray

        bind = ray.util.get_node_ip_address()
        for _ in range(2):
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.bind((bind, 0))
            listener.listen(4)
            self._listeners.append(listener)
        return {"address": bind, "ports": [s.getsockname()[1] for s in self._listeners], "actor_pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id()}

    def start(self, token: bytes, log_dir: str, event_loop: str) -> int:
        """Accept the runner's two connections (each proves itself with ``token``), then start
        the host on them: its pid. Its standard error goes to ``<log_dir>/host-<pid>.log``."""
        deadline = time.monotonic() + ACCEPT_TIMEOUT_S
        channels = [self._accept(listener, token, deadline) for listener in self._listeners]
        for listener in self._listeners:
            listener.close()
        self._listeners.clear()
        folder = Path(log_dir)
        folder.mkdir(parents=True, exist_ok=True)
        starting = folder / f".host-starting-{os.getpid()}.log"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, env.get("PYTHONPATH")) if p)
        fds = [c.fileno() for c in channels]
        try:
            with open(starting, "ab") as log:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "joynr_sim.host", "--control-fd", str(fds[0]), "--query-fd", str(fds[1]),
                     "--event-loop", event_loop],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=fds, env=env)
        finally:
            for channel in channels:
                channel.close()
        os.replace(starting, folder / f"host-{self._process.pid}.log")
        return self._process.pid

    def _accept(self, listener: socket.socket, token: bytes, deadline: float) -> socket.socket:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no connection with the run's token within {ACCEPT_TIMEOUT_S:g} s")
            listener.settimeout(left)
            conn, _ = listener.accept()
            conn.settimeout(min(left, 5.0))
            try:
                heard = _read_exactly(conn, len(token))
            except OSError:
                heard = b""
            if hmac.compare_digest(heard, token):
                conn.settimeout(None)
                return conn
            conn.close()  # not the runner: the next connection may be

    def signal(self, sig: int) -> None:
        if self._process is not None and self._process.poll() is None:
            try:
                self._process.send_signal(sig)
            except ProcessLookupError:
                pass

    def wait(self) -> int:
        """Until the host ends: its exit status (a negative number: the signal that ended it)."""
        if self._process is None:
            return 0
        return self._process.wait()

    def kill(self) -> int | None:
        """SIGKILL of the host, waited for: its pid."""
        if self._process is None:
            return None
        self.signal(signal.SIGKILL)
        self._process.wait()
        return self._process.pid


def _read_exactly(conn: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = conn.recv(left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
