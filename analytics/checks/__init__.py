"""The checks, one module each, in the order the report lists them.

A check is a DataFrame computation over the kept events that returns its violations
with one row per violation: ``run``, ``key`` (stable: names the violation across runs of
the checker), ``kind``, ``summary``, ``details`` (JSON text) and ``refs`` (the events, as
``(rt, seq)``, that make the minimal trace slice showing it).
"""

from __future__ import annotations

from .base import Check, CheckContext, CheckOutput
from .gcd_consistency import CHECK as GCD_CONSISTENCY
from .link_uniqueness import CHECK as LINK_UNIQUENESS
from .lost_message import CHECK as LOST_MESSAGE
from .multicast import CHECK as MULTICAST
from .overwrite import CHECK as OVERWRITE_VIOLATION
from .routing_loop import CHECK as ROUTING_LOOP
from .takeover_storm import CHECK as TAKEOVER_STORM

CHECKS: dict[str, Check] = {
    c.name: c
    for c in (
        ROUTING_LOOP,
        OVERWRITE_VIOLATION,
        LOST_MESSAGE,
        GCD_CONSISTENCY,
        LINK_UNIQUENESS,
        TAKEOVER_STORM,
        MULTICAST,
    )
}

__all__ = ["CHECKS", "Check", "CheckContext", "CheckOutput"]
