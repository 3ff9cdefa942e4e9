"""The trace event catalogue: every event name and field, declared once in ``events.json``.

The simulator's trace writer (``joynr_sim.trace``) and the Spark checker (``analytics``)
both read it, so neither needs the other: the checker stays an independent oracle that
never imports the simulator. This package is data plus a loader; it imports nothing of
either side. Its one other contract is where a run directory is: a path or a ``file:`` URL
(``run_location``), which the simulator writes and the checker reads.

Each field is a JSON Schema fragment with a JSON ``type`` (a list when null is allowed),
a one-line ``description`` and, where the values are a closed set, an ``enum`` or a
``$ref`` to one of the shared definitions (``$defs``: runtime kinds, address types,
routing-entry origins, policy names, the routing-entry record). ``format: int32`` marks a
small count.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@cache
def catalogue() -> dict[str, Any]:
    """The parsed ``events.json``, read once. Shared: callers must not change it."""
    text = resources.files(__name__).joinpath("events.json").read_text(encoding="utf-8")
    return json.loads(text)


SCHEMA_VERSION: int = catalogue()["version"]
EVENTS: frozenset[str] = frozenset(catalogue()["events"])
COMMON_FIELDS: tuple[str, ...] = tuple(catalogue()["common"])


@cache
def loss_spec() -> dict[str, Any]:
    """The parsed ``loss.json``: what explains a request without a reply, the one
    specification both the harness and the checker implement. Shared: do not change it."""
    text = resources.files(__name__).joinpath("loss.json").read_text(encoding="utf-8")
    return json.loads(text)


def loss_explanations() -> tuple[str, ...]:
    """The ids of the loss explanations, in the order ``loss.json`` gives them."""
    return tuple(e["id"] for e in loss_spec()["explanations"])


def vocabulary(name: str) -> tuple[str, ...]:
    """The values of one shared definition, e.g. ``vocabulary("origin")``."""
    try:
        return tuple(catalogue()["$defs"][name]["enum"])
    except KeyError:
        raise KeyError(f"trace catalogue: no vocabulary {name!r}") from None


def event_fields(ev: str) -> dict[str, dict[str, Any]]:
    """The fields an event may carry: the common ones, then its own."""
    try:
        own = catalogue()["events"][ev]["fields"]
    except KeyError:
        raise KeyError(f"trace catalogue: no event {ev!r}") from None
    return {**catalogue()["common"], **own}


def resolve(spec: dict[str, Any]) -> dict[str, Any]:
    """A field spec with its ``$ref`` (``#/$defs/NAME``) merged in; its own keys win."""
    ref = spec.get("$ref")
    if ref is None:
        return spec
    prefix = "#/$defs/"
    if not ref.startswith(prefix) or ref[len(prefix):] not in catalogue()["$defs"]:
        raise KeyError(f"trace catalogue: unresolvable $ref {ref!r}")
    target = resolve(catalogue()["$defs"][ref[len(prefix):]])
    merged = {**target, **spec}
    del merged["$ref"]
    return merged


def json_schema(ev: str) -> dict[str, Any]:
    """A JSON Schema (2020-12) for one event: its declared fields only, common ones required."""
    properties = dict(event_fields(ev))
    properties["v"] = {**properties["v"], "const": SCHEMA_VERSION}
    properties["ev"] = {**properties["ev"], "const": ev}
    return {
        "$schema": JSON_SCHEMA_DIALECT,
        "$defs": catalogue()["$defs"],
        "type": "object",
        "properties": properties,
        "required": list(COMMON_FIELDS),
        "additionalProperties": False,
    }


__all__ = [
    "COMMON_FIELDS", "EVENTS", "SCHEMA_VERSION", "catalogue", "event_fields", "json_schema",
    "loss_explanations", "loss_spec", "resolve", "vocabulary",
]
