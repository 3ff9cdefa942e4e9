"""The memory network: brokers, WebSockets and links in one process, in virtual time.

A simulation chooses its network (``Simulation(network=...)``, ``--network``): ``memory``
(this package), or the real brokers ``amqtt`` and ``mosquitto``, on real sockets. The
same nodes run on either; only the connections and the clock differ.
"""

from __future__ import annotations

import asyncio

from ..clock import SimClock
from .virtual_loop import on_virtual_time

MEMORY = "memory"
NETWORKS = (MEMORY, "amqtt", "mosquitto")
# Where the clock of a run on the memory network starts: a fixed date, so a seed replays
# the same expiry dates (2026-01-01T00:00:00Z).
EPOCH_MS = 1_767_225_600_000
DEFAULT_BROKER = "amqtt"


def check_network(network: object) -> str:
    if network not in NETWORKS:
        raise ValueError(f"network: expected one of {', '.join(NETWORKS)}, got {network!r}")
    return network  # type: ignore[return-value]


def choose_network(network: str | None, broker: str) -> tuple[str | None, str]:
    """(network, broker) of a simulation: ``amqtt`` and ``mosquitto`` are the broker of
    that kind; ``memory`` refuses a broker of its own (an external URL) in one line."""
    if network is None:
        return None, broker
    check_network(network)
    if network != MEMORY:
        if broker not in (DEFAULT_BROKER, network):
            raise ValueError(f"network: {network!r} and broker {broker!r} disagree; name one of them")
        return network, network
    if broker not in (DEFAULT_BROKER, MEMORY):
        raise ValueError(f"network: the memory network has its own brokers; broker {broker!r} "
                         "needs a real network (--network amqtt|mosquitto or an external broker)")
    return MEMORY, DEFAULT_BROKER


def memory_processes(hosts: object, join: object) -> bool:
    """``processes`` of a simulation on the memory network: every runtime in this process,
    on the virtual-time loop the simulation must run on."""
    if not on_virtual_time():
        raise ValueError("network: a simulation on the memory network runs on a virtual-time loop "
                         "(joynr_sim.network.virtual_loop.run)")
    if hosts is not None or join is not None:
        raise ValueError("network: on the memory network every runtime runs in this process (no hosts, no join)")
    return False


def virtual_clock() -> SimClock:
    """The run's clock on the memory network: the virtual-time loop's time from EPOCH_MS."""
    loop = asyncio.get_running_loop()
    return SimClock(source=lambda: EPOCH_MS + round(loop.time() * 1000))
