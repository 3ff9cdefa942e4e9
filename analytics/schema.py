"""The explicit Spark schema of the trace, derived from the event catalogue.

The catalogue (``trace_schema/events.json``) declares every event and field with its JSON
type; this module chooses the columns the checks read and gives each the Spark type its
declarations imply. A field whose JSON type differs between event families is read as a
string (Spark keeps the raw JSON text of a non-string value): ``resent`` is a bool in
``msg.out`` and a count in ``link.resume``; ``result`` is a list of objects in ``gcd.lookup``
and of ids in ``lcd.*``; ``participant`` is a list in ``gcd.remove`` for ``remove_old``.
Fields no check reads (``durability``, ``line``, ...) are not columns.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from trace_schema import EVENTS, SCHEMA_VERSION, catalogue, resolve

__all__ = [
    "COLUMNS", "ENTRY", "EVENTS", "FIELD_NAMES", "GCD_RESULT", "REQUIRED", "SCHEMA_VERSION",
    "TRACE_V1", "spark_type",
]

# Fields without which an event cannot be placed in a run, a runtime and an order.
REQUIRED = ("v", "ts", "seq", "run", "rt", "ev")

# The columns the checks read, in this order.
COLUMNS = (
    # common
    "v", "ts", "seq", "run", "rt", "kind", "ev",
    # msg.*
    "msg", "type", "from", "to", "hops", "via", "addr_type", "target", "gbid", "corr", "exp",
    "resent", "reason",
    # rt.* (``now``: the runtime's own clock, where a clock skew set it off the run's)
    "participant", "policy", "outcome", "origin", "old", "new", "entry", "now",
    # gcd.*, lcd.*
    "op", "gbids", "cc", "error", "domains", "interface", "result", "removed", "max_last_seen",
    "participants", "scope",
    # link.*
    "client_id", "conn", "mode", "closed", "victim", "settled", "detail", "runtimes", "count",
    "window_ms", "session_present",
    # life.*, step
    "target_kind", "own_topics", "port", "index", "name",
    # sub.*, mc.*
    "sid", "provider", "visible",
)

_PRIMITIVES: dict[str, T.DataType] = {
    "string": T.StringType(), "boolean": T.BooleanType(), "integer": T.LongType(),
}


def spark_type(spec: dict[str, Any]) -> T.DataType | None:
    """The Spark type of one declared field; None for a field that is always null."""
    spec = resolve(spec)
    declared = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    types = [t for t in declared if t != "null"]
    if not types:
        return None
    if len(types) > 1:
        return T.StringType()  # one field, several JSON types: keep the raw text
    kind = types[0]
    if kind == "integer" and spec.get("format") == "int32":
        return T.IntegerType()
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array":
        return T.ArrayType(spark_type(spec["items"]) or T.StringType())
    if kind == "object":
        return T.StructType(
            [T.StructField(name, spark_type(sub) or T.StringType())
             for name, sub in spec["properties"].items()]
        )
    raise ValueError(f"trace catalogue: field type {kind!r} has no Spark type")


def _column_type(name: str) -> T.DataType:
    """One type for a field across every event that declares it."""
    cat = catalogue()
    specs = [cat["common"][name]] if name in cat["common"] else []
    specs += [e["fields"][name] for e in cat["events"].values() if name in e["fields"]]
    if not specs:
        raise ValueError(f"trace catalogue: no event declares the column {name!r}")
    found: list[T.DataType] = []
    for spec in specs:
        dtype = spark_type(spec)
        if dtype is not None and dtype not in found:
            found.append(dtype)
    return found[0] if len(found) == 1 else T.StringType()


ENTRY = spark_type(catalogue()["$defs"]["entry"])
GCD_RESULT = spark_type(catalogue()["$defs"]["gcd_result"])
TRACE_V1 = T.StructType([T.StructField(name, _column_type(name)) for name in COLUMNS])
FIELD_NAMES = COLUMNS
