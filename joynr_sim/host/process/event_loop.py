"""The event loop a host process runs on.

uvloop by default: a host spends its CPU on sockets (WebSocket frames, MQTT packets, the
control channel) and on the loop's own bookkeeping between them, which uvloop does in C on
libuv. ``JOYNR_SIM_EVENT_LOOP=asyncio`` runs hosts on the standard library's loop instead,
to compare the two or to rule uvloop out. The runner and in-process runtimes (and so the
tests that drive runtimes without hosts) keep the standard loop.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

EVENT_LOOP_ENV = "JOYNR_SIM_EVENT_LOOP"
CHOICES = ("uvloop", "asyncio")


def event_loop_choice() -> str:
    """The loop named by the environment; a ValueError that says what is wrong otherwise."""
    choice = os.environ.get(EVENT_LOOP_ENV, "uvloop").strip() or "uvloop"
    if choice not in CHOICES:
        raise ValueError(f"{EVENT_LOOP_ENV}: expected {' or '.join(CHOICES)}, got {choice!r}")
    return choice


def event_loop_factory(choice: str | None = None) -> Callable[[], asyncio.AbstractEventLoop]:
    """A factory for ``asyncio.Runner``: uvloop's loop, or the standard library's."""
    if (choice or event_loop_choice()) == "asyncio":
        return asyncio.new_event_loop
    import uvloop  # imported only where it runs: the runner never needs it

    return uvloop.new_event_loop


def loop_name() -> str:
    """The running loop's library, as ``JOYNR_SIM_EVENT_LOOP`` names it."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"
