"""The scenario's names of its participants: a proxy's participant id is a UUID the runtime
made up, a provider's may be one too, but the scenario calls them ``px`` and ``echo``. The
one reading of those names, for ``joynr-sim trace --participant @px`` and for the report.

The trace records each step (``step`` events of the runner, with the step's title, which
names the proxy or provider and its runtime: ``proxy px on consumer -> dom/joynrsim/Echo``,
``register echo on app1 (...)``) and each routing entry a runtime puts for a participant it
registers (``rt.put`` with origin ``registration``). The participant a proxy or register
step made is the one its runtime registered while the step ran: after the step before it
ended, by the time it ended (simulated time). A name given to a second participant (a
provider registered again under another id) stands for both, in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

NAME_PREFIX = "@"  # as in a scenario: ``@name`` is the participant id of its provider or proxy

_MADE_BY = re.compile(r"^(?P<kind>register|proxy) (?P<name>\S+) on (?P<runtime>\S+)")
_ROLE = {"register": "provider", "proxy": "proxy"}


@dataclass(frozen=True)
class Named:
    name: str
    role: str  # proxy | provider
    runtime: str


def scenario_names(events: list[dict[str, Any]]) -> dict[str, Named]:
    """participant id -> its scenario name, for every proxy and provider a step made, in the
    order of the steps."""
    registered = [e for e in events if e.get("ev") == "rt.put" and e.get("origin") == "registration"
                  and isinstance(e.get("participant"), str) and e["participant"]]
    names: dict[str, Named] = {}
    since = None
    for step in events:
        if step.get("ev") != "step" or step.get("rt") != "runner":
            continue
        ts = step.get("ts", 0)
        made = _MADE_BY.match(str(step.get("name") or ""))
        if made and step.get("outcome") == "ok":
            for put in registered:
                if (put.get("rt") == made["runtime"] and put["participant"] not in names
                        and (since is None or put.get("ts", 0) >= since) and put.get("ts", 0) <= ts):
                    names[put["participant"]] = Named(made["name"], _ROLE[made["kind"]], made["runtime"])
                    break
        since = ts
    return names


def ids_by_name(names: dict[str, Named]) -> dict[str, list[str]]:
    """Each scenario name with the participant ids it stood for, in order."""
    by_name: dict[str, list[str]] = {}
    for pid, named in names.items():
        by_name.setdefault(named.name, []).append(pid)
    return by_name
