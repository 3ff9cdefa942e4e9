"""Runs on the memory network in a process of their own, with a bound on their wall time.

A run on the memory network takes well under a second, in virtual time. One that never
ends (something that waits without a timeout while the loop keeps finding work at the same
instant) would hold explore forever, and a thread cannot be stopped from outside. So these
runs go to a worker process, started once (an interpreter of its own: it shares no lock
with the Spark session's threads) and given one run at a time; a run that has not ended within
``HANG_S`` seconds of wall time is a hang: the worker is killed (the next run starts a new
one) and the run is reported as an error of its own kind, ``hung``.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import IO, Any

HANG_S = 30.0  # wall time; a memory run of explore's size takes a fraction of a second
HUNG = "hung"
_LEN = struct.Struct(">Q")


class Hung(Exception):
    """The run did not end within its bound of wall time, or its worker died under it; the
    message's first word says which (``hung``, ``worker died``)."""


def _send(out: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value)
    out.write(_LEN.pack(len(data)) + data)
    out.flush()


def _read(stream: IO[bytes], n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            raise EOFError("the worker's pipe closed")
        data += chunk
    return data


def _recv(stream: IO[bytes]) -> Any:
    (n,) = _LEN.unpack(_read(stream, _LEN.size))
    return pickle.loads(_read(stream, n))


def serve() -> None:
    """The worker: a run per request read from stdin, its result written to stdout, until
    stdin closes. What a run prints goes to stderr: stdout carries the results only."""
    # Ctrl-C reaches the whole process group: the explorer decides, and ends the worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    from ..scenario.loader import parse_scenario
    from ..scenario.runner import run_scenario

    requests = sys.stdin.buffer
    while True:
        try:
            text, name, where, kw = _recv(requests)
        except EOFError:
            return
        try:
            scenario = parse_scenario(text, f"<{name}>")
            reply: tuple[bool, Any] = (True, asyncio.run(run_scenario(scenario, where, **kw)))
        except Exception as exc:  # sent back and raised there, as if the run had been local
            reply = (False, exc)
        try:
            _send(replies, reply)
        except Exception as exc:  # an exception that does not pickle: its words do
            _send(replies, (False, RuntimeError(f"{type(reply[1]).__name__}: {reply[1]}; {exc}")))


class Worker:
    def __init__(self, hang_s: float = HANG_S) -> None:
        self.hang_s = hang_s
        self._proc: subprocess.Popen[bytes] | None = None
        self.hangs = 0

    def run(self, text: str, name: str, where: Path, **kw: Any) -> Any:
        """``run_scenario`` of the scenario ``text`` into ``where`` in the worker; raises
        ``Hung`` when it did not end in time."""
        if self._proc is None or self._proc.poll() is not None:
            # Its own interpreter (not a fork of this one, which runs Spark's threads) that
            # imports nothing of the caller's main module.
            self._proc = subprocess.Popen([sys.executable, "-m", "joynr_sim.explore.worker"],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            _send(proc.stdin, (text, name, str(where), kw))
            ready, _, _ = select.select([proc.stdout], [], [], self.hang_s)
            if not ready:
                self.hangs += 1
                self.close(kill=True)
                raise Hung(f"{HUNG}: the run did not end within {self.hang_s:g} s")
            ok, payload = _recv(proc.stdout)
        except (EOFError, OSError) as exc:  # the worker went away under the run (killed, out of memory)
            code = proc.poll()
            self.close(kill=True)
            raise Hung(f"worker died: {type(exc).__name__} (exit status {code})") from None
        if not ok:
            raise payload
        return payload

    def close(self, *, kill: bool = False) -> None:
        """End the worker: it leaves when its stdin closes; one that hangs is killed."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not kill and proc.stdin is not None:
            proc.stdin.close()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()


def hung_result(scenario: Any, where: Path, policy: str, seed: int, error: str) -> Any:
    """The result of a run that hung: an error, its steps not known to have run."""
    from ..scenario.runner import RunResult, StepOutcome

    return RunResult(scenario.name, None, str(Path(where) / scenario.name), "", policy, "memory", seed,
                     {"seed": scenario.reproduces.seed, "scenario": scenario.reproduces.scenario},
                     network="memory", outcome="error", error=error,
                     steps=[StepOutcome(s.index, s.kind, s.title, s.line) for s in scenario.steps])


if __name__ == "__main__":
    serve()
