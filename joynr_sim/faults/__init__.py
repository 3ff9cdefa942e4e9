"""Faults on the links between runtimes: a TCP proxy on loopback per link (``proxy``) and
the simulation's API over them, ``sim.faults`` (``links``)."""

from .links import MAX_DELAY_MS, TRACE_RUNTIME_ID, Faults, ProxiedBrokers
from .pipe import FAULTS
from .proxy import FaultProxy

__all__ = ["FAULTS", "MAX_DELAY_MS", "TRACE_RUNTIME_ID", "FaultProxy", "Faults", "ProxiedBrokers"]
