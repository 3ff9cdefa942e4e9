"""Ctrl-C during a check: one line from the command, no tracebacks from py4j or pyspark.

A terminal's Ctrl-C reaches the whole foreground process group. pyspark starts its JVM
ignoring SIGINT; the Python side raises KeyboardInterrupt, the command ends its JVM (see
``SparkHandle.stop``) and prints "joynr-sim <command>: interrupted".
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark import SparkConf, SparkContext


def end_jvm(proc: subprocess.Popen, archive=None, grace_s: float = 10.0) -> None:
    """End the JVM and wait for it; the class archive it was to write as it exits (if any)
    is given up: an interrupted dump is of no use."""
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    if archive is not None:
        archive.discard()


class _Py4JRootRecords(logging.Filter):
    """py4j reports a command cut short (Ctrl-C, a JVM gone) through the root logger, with
    its traceback; the command says what happened in one line instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


def quiet_py4j() -> None:
    root = logging.getLogger()
    if not any(isinstance(f, _Py4JRootRecords) for f in root.filters):
        root.addFilter(_Py4JRootRecords())


def spark_context(conf: SparkConf, gateway) -> SparkContext:
    """A SparkContext that leaves Ctrl-C to the command: its own SIGINT handler asks the JVM
    to cancel every job over the connection the interrupted call is reading, which fails
    (a reentrant read) and prints tracebacks; the default handler raises KeyboardInterrupt,
    which ends the command with one line."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        return SparkContext(conf=conf, gateway=gateway)
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGINT, previous)


@contextmanager
def held_sigint() -> Iterator[list[bool]]:
    """Ctrl-C while Spark's JVM comes up is held until it is up (or failed to come up), so the
    command can end the JVM it started instead of leaving it to exit when this process does
    (a JVM writing its class archive takes seconds more). The list is not empty when one
    came; the caller then raises KeyboardInterrupt."""
    came: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return
    previous = signal.signal(signal.SIGINT, lambda *_: came.append(True))
    try:
        yield came
    finally:
        signal.signal(signal.SIGINT, previous)


@contextmanager
def noted_sigint() -> Iterator[list[bool]]:
    """Ctrl-C raises KeyboardInterrupt, as by default, and is noted: a Ctrl-C can also reach
    the command as a py4j error, when the call it interrupts loses its connection before
    the KeyboardInterrupt surfaces (seen once in some hundred interrupted checks: "Answer
    from Java side is empty"). The list is not empty when one came; an error after it is
    the interrupt's."""
    came: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield came
        return

    def note(signum, frame):
        came.append(True)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield came
    finally:
        signal.signal(signal.SIGINT, previous)
