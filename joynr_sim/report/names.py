"""The scenario's names of its participants: a proxy's participant id is a UUID the runtime
made up, a provider's may be one too, but the scenario calls them ``px`` and ``echo``.

The trace records each step (``step`` events of the runner, with the step's title, which
names the proxy or provider and its runtime: ``proxy px on consumer -> dom/joynrsim/Echo``,
``register echo on app1 (...)``) and each routing entry a runtime creates for a participant
it registers (``rt.put`` with origin ``registration``). The participant a proxy or register
step made is the one its runtime registered while the step ran: after the step before it
ended, by the time it ended.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Event = dict[str, Any]

_MADE_BY = re.compile(r"^(?P<kind>register|proxy) (?P<name>\S+) on (?P<runtime>\S+)")
_ROLE = {"register": "provider", "proxy": "proxy"}


@dataclass(frozen=True)
class Named:
    name: str
    role: str  # proxy | provider
    runtime: str


def participant_names(events: list[Event]) -> dict[str, Named]:
    """participant id -> its scenario name, for every proxy and provider a step made."""
    steps = [e for e in events if e["ev"] == "step"]
    registered = [e for e in events if e["ev"] == "rt.put" and e.get("origin") == "registration"
                  and e.get("outcome") == "created" and isinstance(e.get("participant"), str)]
    names: dict[str, Named] = {}
    since = None
    for step in steps:
        made = _MADE_BY.match(str(step.get("name") or ""))
        if made and step.get("outcome") == "ok":
            for put in registered:
                if (put["rt"] == made["runtime"] and put["participant"] not in names
                        and (since is None or put["ts"] >= since) and put["ts"] <= step["ts"]):
                    names[put["participant"]] = Named(made["name"], _ROLE[made["kind"]], made["runtime"])
                    break
        since = step["ts"]
    return names


def label(names: dict[str, Named], participant: Any) -> str:
    """A participant as the page shows it: its scenario name, else its id."""
    text = str(participant)
    named = names.get(text)
    return named.name if named is not None else text


def described(names: dict[str, Named], participant: str) -> str:
    """``px (proxy on consumer, 4f2c…)``: what the scenario calls it, and its id."""
    named = names.get(participant)
    if named is None:
        return participant
    return f"{named.name} ({named.role} on {named.runtime}, {participant})"
