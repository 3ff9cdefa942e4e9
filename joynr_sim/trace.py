"""The message trace: schema v1 and the per-runtime NDJSON writer.

Each runtime appends to ``<run dir>/trace/<runtime id>.ndjson``, one JSON object a line.
A writer made with ``batched=True`` (a runtime's) collects the lines of one event-loop
turn and hands them to the operating system in one write at its end (or when ``flush``
is called, as a host does before it answers the runner); every other writer, and any
emit from outside the loop's thread, writes each line before returning. Readers tolerate
a torn last line.

A write that fails (a full or read-only file system) never raises into the runtime: the
writer takes back the part of the write that reached the file, so the trace ends on its
last whole line, writes nothing more, and records the failure as the run's
(``joynr_sim.write_failure``), which ends the run.

Common fields: ``v`` (schema version), ``ts`` (simulated epoch ms), ``seq`` (per
runtime, from 0), ``run`` (run id), ``rt`` (runtime id), ``kind`` (runtime kind), ``ev``.
Every event name and field is declared in the catalogue ``trace_schema/events.json``,
which the checker reads too; an event name not in it is refused here.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import stat
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from trace_schema import EVENTS, SCHEMA_VERSION

from . import write_failure
from .core.address import describe, type_name
from .core.routing import RoutingDecision, RoutingEntry
from .write_failure import WriteFailure

_ENCODER = json.JSONEncoder(separators=(",", ":"))  # made once: json.dumps makes one per call


def encode_line(event: dict[str, Any]) -> bytes:
    """One NDJSON line. orjson writes it several times faster than json (trace lines were
    a tenth of a request/reply's CPU); what orjson refuses (a lone surrogate, an int over
    64 bits, a key that is no string) gets json's encoding, so no event is lost."""
    try:
        return orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return (_ENCODER.encode(event) + "\n").encode("ascii")


def entry_record(entry: RoutingEntry | None) -> dict[str, Any] | None:
    """A routing entry as the trace stores it."""
    if entry is None:
        return None
    return {
        "type": type_name(entry.address),
        "addr": describe(entry.address),
        "visible": entry.is_globally_visible,
        "expiry": entry.expiry_date_ms,
        "sticky": entry.is_sticky,
    }


class TraceWriter:
    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        run_id: str,
        runtime_id: str,
        kind: str,
        clock: Callable[[], int],
        batched: bool = False,
    ) -> None:
        """batched: the lines of a loop turn go out in one write at its end; a SIGKILL then
        loses the events of the turn it interrupts."""
        self.path = Path(run_dir) / "trace" / f"{runtime_id}.ndjson"
        # The clock the runtime decides by, when it may read otherwise than ``clock``.
        self.decision_clock: Callable[[], int] | None = None
        self.run_id = run_id
        self.runtime_id = runtime_id
        self.kind = kind
        self.clock = clock
        self._lock = threading.Lock()  # an emit may come from outside the loop's thread
        self.batched = batched
        self._lines: list[bytes] = []
        self._flush_handle: asyncio.Handle | None = None
        self._seq = 0
        self.failure: WriteFailure | None = None  # set by the first write that failed
        self._file: io.FileIO | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Unbuffered: a write that fails leaves nothing behind to be written at close.
            self._file = open(self.path, "ab", buffering=0)
            # A new runtime's file is empty: only a restart reads what its predecessor wrote
            # (every runtime of a fleet's start-up otherwise opened its file three times).
            if os.fstat(self._file.fileno()).st_size > 0:
                self._seq = self._next_seq()
                if self._ends_torn():
                    self._write(b"\n")  # a restart after a crash mid-write starts a fresh line
        except OSError as exc:
            self._failed(exc)

    def _ends_torn(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(0, 2)
            if f.tell() == 0:
                return False
            f.seek(-1, 2)
            return f.read(1) != b"\n"

    def _next_seq(self) -> int:
        """A restarted runtime continues its own sequence in the same file."""
        last = -1
        for event in read_events(self.path):
            last = max(last, int(event.get("seq", -1)))
        return last + 1

    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        if ev not in EVENTS:
            raise ValueError(f"ev: unknown trace event {ev!r}")
        with self._lock:
            event = {
                "v": SCHEMA_VERSION,
                "ts": self.clock(),
                "seq": self._seq,
                "run": self.run_id,
                "rt": self.runtime_id,
                "kind": self.kind,
                "ev": ev,
                **fields,
            }
            self._seq += 1
            if self.failure is not None:
                return event  # this trace ended on its last whole line
            line = encode_line(event)
            loop = self._loop() if self.batched else None
            if loop is None:
                if self._lines:  # what this turn collected goes first
                    self._write_lines()
                self._write(line)
            else:
                self._lines.append(line)
                if self._flush_handle is None:
                    self._flush_handle = loop.call_soon(self.flush)
        return event

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop | None:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return None

    @property
    def pending(self) -> bool:
        """Whether this turn collected lines not yet handed to the operating system."""
        return bool(self._lines)

    def flush(self) -> None:
        """Hand what this turn collected to the operating system now."""
        with self._lock:
            if self._flush_handle is not None:
                self._flush_handle.cancel()
                self._flush_handle = None
            if self._lines and self._file is not None and not self._file.closed:
                self._write_lines()

    def _write_lines(self) -> None:
        lines, self._lines = self._lines, []
        self._write(b"".join(lines))

    def _write(self, data: bytes) -> None:
        """To the operating system before returning, as a line-buffered text file did. A
        write that fails is taken back to the last whole line and ends this trace."""
        file = self._file
        if file is None or self.failure is not None:
            return
        done = 0
        try:
            done = file.write(data)
            while done < len(data):  # a full disk may take part of a write, then refuse
                done += file.write(memoryview(data)[done:])
        except OSError as exc:
            if done:
                try:  # O_APPEND and one writer: the torn part is the file's last ``done`` bytes
                    os.ftruncate(file.fileno(), os.fstat(file.fileno()).st_size - done)
                except OSError:
                    pass  # a device (e.g. /dev/full) keeps nothing to take back
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.failure = write_failure.record(self.path, exc)
        self._lines = []

    def routing_listener(self, decision: RoutingDecision) -> None:
        """Subscribe to a RoutingTable: every decision becomes an rt.* event; with ``now``
        when the runtime decides by a clock of its own that reads otherwise (a clock skew:
        the checks judge expiry by it)."""
        skewed = {}
        if self.decision_clock is not None:
            now = self.decision_clock()
            if now != self.clock():
                skewed["now"] = now
        self.emit(
            f"rt.{decision.op}",
            participant=decision.participant_id,
            policy=decision.policy,
            outcome=decision.outcome,
            reason=decision.reason,
            origin=decision.origin,
            old=entry_record(decision.old),
            new=entry_record(decision.new),
            entry=entry_record(decision.entry),
            **skewed,
        )

    def close(self) -> None:
        self.flush()
        with self._lock:
            if self._file is not None and not self._file.closed:
                try:
                    self._file.close()
                except OSError as exc:  # e.g. a network file system that reports at close
                    if self.failure is None:
                        self._failed(exc)


def read_events(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The events of one trace file; a torn line (a crash mid-write, last in the file or
    followed by what a restarted runtime wrote) is skipped. A trace that is no regular file
    (linked to a device: /dev/full reads as endless zeros) holds no events."""
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        return
    with f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return
        for line in f:
            if not line.endswith("\n"):
                return  # torn last line
            try:
                yield json.loads(line)
            except ValueError:
                continue


def _well_formed(event: Any) -> bool:
    """An object whose ordering fields have their types: a line a tool can sort and show. A
    hand-edited or corrupt trace may hold others; readers pass over them."""
    return (
        isinstance(event, dict)
        and type(event.get("ts")) is int and type(event.get("seq")) is int
        and isinstance(event.get("rt"), str) and isinstance(event.get("ev"), str)
    )


def read_run(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All events of a run, ordered by simulated time then runtime sequence; a line that
    is no event with an int ``ts`` and ``seq`` and a string ``rt`` and ``ev`` is passed over."""
    events: list[dict[str, Any]] = []
    for path in sorted((Path(run_dir) / "trace").glob("*.ndjson")):
        events.extend(e for e in read_events(path) if _well_formed(e))
    events.sort(key=lambda e: (e["ts"], e["rt"], e["seq"]))
    return events
