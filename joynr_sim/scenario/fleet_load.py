"""A fleet's load, counted: each proxy's calls are ``load`` ops carried out inside its host,
one op per proxy per slice (``slicing``), and every call counts in the wave window its op
started in (``Window``): answered, failed (an error reply) or lost (no reply within its
ttl_ms, or its op never came back)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import JoynrTimeoutException
from .fleet_model import Fleet

MAX_OPS_PER_S = 200.0  # load ops the runner sends a second
OP_CONCURRENCY = 4  # calls of one op in flight at a time


@dataclass
class Window:
    name: str
    from_s: float
    to_s: float
    started: int = 0
    answered: int = 0
    failed: int = 0
    lost: int = 0
    failed_by: dict[str, int] = field(default_factory=dict)  # error name or reason -> calls

    def add(self, calls: int, outcome: dict[str, Any] | BaseException) -> None:
        self.started += calls
        if isinstance(outcome, BaseException):
            self.lost += calls
            reason = f"op: {type(outcome).__name__}"
            self.failed_by[reason] = self.failed_by.get(reason, 0) + calls
            return
        self.answered += outcome["ok"]
        for name, n in outcome["failed"].items():
            if name == JoynrTimeoutException.__name__:
                self.lost += n
            else:
                self.failed += n
            self.failed_by[name] = self.failed_by.get(name, 0) + n


def windows(fleet: Fleet) -> list[Window]:
    cuts = sorted({w.at_s for w in fleet.waves} | {0})
    names = {w.at_s: [] for w in fleet.waves}
    for w in fleet.waves:
        names[w.at_s].append(f"wave {w.index}")
    out = []
    for i, start in enumerate(cuts):
        end = cuts[i + 1] if i + 1 < len(cuts) else fleet.duration_s
        out.append(Window(", ".join(names.get(start, [])) or "before waves", start, end))
    return out



def slicing(rate: float, proxies: int) -> tuple[float, int]:
    """(slice seconds, calls per op): whole calls per op at exactly the rate asked, in
    slices of at least a second and at most MAX_OPS_PER_S ops a second."""
    shortest = max(1.0, proxies / MAX_OPS_PER_S)
    calls = max(1, math.ceil(rate * shortest - 1e-9))
    return calls / rate, calls


async def one_op(app: Any, proxy: Any, fleet: Fleet, window: Window, calls: int) -> None:
    """``calls`` calls of ``proxy``, driven inside its runtime's host, counted in ``window``."""
    try:
        outcome: dict[str, Any] | BaseException = await app.load(
            proxy.participant_id, proxy.provider_participant_id, fleet.method, list(fleet.args),
            calls=calls, concurrency=min(calls, OP_CONCURRENCY), ttl_ms=fleet.ttl_ms)
    except Exception as exc:  # the host died or did not answer in time: the calls are lost
        outcome = exc
    window.add(calls, outcome)
