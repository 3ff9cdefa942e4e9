"""Trace schema v1 as an explicit Spark schema: the contract of the README, field by field.

Fields whose JSON type differs between event families are read as strings (Spark keeps
the raw JSON text of a non-string value): ``resent`` is a bool in ``msg.out`` and a count in
``link.resume``; ``result`` is a list of objects in ``gcd.lookup`` and of ids in ``lcd.*``;
``detail`` may be text or an object.
"""

from __future__ import annotations

from pyspark.sql import types as T

SCHEMA_VERSION = 1

EVENTS = frozenset(
    {
        "msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop",
        "rt.put", "rt.remove", "rt.purge",
        "gcd.add", "gcd.lookup", "gcd.remove", "gcd.remove_stale", "gcd.touch",
        "lcd.register", "lcd.unregister", "lcd.lookup", "lcd.touch", "lcd.remove_stale",
        "link.attach", "link.detach", "link.steal", "link.resume", "link.recover",
        "link.expire", "link.store", "link.takeover-storm",
        "life.start", "life.stop", "life.crash", "life.restart",
        "step",
    }
)

# Fields without which an event cannot be placed in a run, a runtime and an order.
REQUIRED = ("v", "ts", "seq", "run", "rt", "ev")

_S, _L, _I, _B = T.StringType(), T.LongType(), T.IntegerType(), T.BooleanType()

ENTRY = T.StructType(
    [
        T.StructField("type", _S),
        T.StructField("addr", _S),
        T.StructField("visible", _B),
        T.StructField("expiry", _L),
        T.StructField("sticky", _B),
    ]
)

GCD_RESULT = T.ArrayType(
    T.StructType([T.StructField("participant", _S), T.StructField("gbid", _S)])
)

_FIELDS: list[tuple[str, T.DataType]] = [
    # common
    ("v", _I), ("ts", _L), ("seq", _L), ("run", _S), ("rt", _S), ("kind", _S), ("ev", _S),
    # msg.*
    ("msg", _S), ("type", _S), ("from", _S), ("to", _S), ("hops", _I), ("via", _S),
    ("addr_type", _S), ("target", _S), ("gbid", _S), ("corr", _S), ("resent", _S),
    ("reason", _S),
    # rt.*
    ("participant", _S), ("policy", _S), ("outcome", _S), ("origin", _S),
    ("old", ENTRY), ("new", ENTRY), ("entry", ENTRY),
    # gcd.*, lcd.*
    ("op", _S), ("gbids", T.ArrayType(_S)), ("cc", _S), ("error", _S),
    ("domains", T.ArrayType(_S)), ("interface", _S), ("result", _S),
    ("removed", T.ArrayType(T.ArrayType(_S))), ("max_last_seen", _L),
    ("participants", T.ArrayType(_S)), ("scope", _S),
    # link.*
    ("client_id", _S), ("conn", _S), ("mode", _S), ("closed", _B), ("victim", _S),
    ("settled", _S), ("detail", _S), ("runtimes", T.ArrayType(_S)), ("count", _L),
    ("window_ms", _L),
    # life.*, step
    ("target_kind", _S), ("own_topics", T.ArrayType(_S)), ("port", _I),
    ("index", _I), ("name", _S),
]

TRACE_V1 = T.StructType([T.StructField(name, dtype) for name, dtype in _FIELDS])
FIELD_NAMES = tuple(name for name, _ in _FIELDS)
