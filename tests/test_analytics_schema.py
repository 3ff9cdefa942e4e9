"""The checker's Spark schema, derived from the trace catalogue: the columns and types the
checks read, pinned, so a change of the catalogue that would change what a check sees
fails here first. No Spark session is needed to build a schema."""

from __future__ import annotations

from pyspark.sql import types as T

import trace_schema
from analytics import rules, schema

_S, _L, _I, _B = T.StringType(), T.LongType(), T.IntegerType(), T.BooleanType()
_ENTRY = T.StructType([
    T.StructField("type", _S), T.StructField("addr", _S), T.StructField("visible", _B),
    T.StructField("expiry", _L), T.StructField("sticky", _B),
])
PINNED = [
    ("v", _I), ("ts", _L), ("seq", _L), ("run", _S), ("rt", _S), ("kind", _S), ("ev", _S),
    ("msg", _S), ("type", _S), ("from", _S), ("to", _S), ("hops", _I), ("via", _S),
    ("addr_type", _S), ("target", _S), ("gbid", _S), ("corr", _S), ("exp", _L),
    ("resent", _S),  # a bool in msg.out, a count in link.resume: the raw JSON text
    ("reason", _S),
    ("participant", _S),  # a list in gcd.remove for remove_old
    ("policy", _S), ("outcome", _S), ("origin", _S),
    ("old", _ENTRY), ("new", _ENTRY), ("entry", _ENTRY), ("now", _L),
    ("op", _S), ("gbids", T.ArrayType(_S)), ("cc", _S), ("error", _S),
    ("domains", T.ArrayType(_S)), ("interface", _S),
    ("result", _S),  # objects in gcd.lookup, ids in lcd.*
    ("removed", T.ArrayType(T.ArrayType(_S))), ("max_last_seen", _L),
    ("participants", T.ArrayType(_S)), ("scope", _S),
    ("client_id", _S), ("conn", _S), ("mode", _S), ("closed", _B), ("victim", _S),
    ("settled", _L), ("detail", _S), ("runtimes", T.ArrayType(_S)), ("count", _L),
    ("window_ms", _L), ("session_present", _B),
    ("target_kind", _S), ("own_topics", T.ArrayType(_S)), ("port", _I),
    ("index", _I), ("name", _S),
    ("sid", _S), ("provider", _S), ("visible", _B),
]


def test_the_derived_schema_is_the_pinned_one():
    assert [(f.name, f.dataType) for f in schema.TRACE_V1.fields] == PINNED
    assert schema.FIELD_NAMES == tuple(name for name, _ in PINNED)
    assert schema.ENTRY == _ENTRY
    assert schema.GCD_RESULT == T.ArrayType(
        T.StructType([T.StructField("participant", _S), T.StructField("gbid", _S)])
    )
    assert schema.EVENTS == trace_schema.EVENTS and schema.SCHEMA_VERSION == 1


def test_spark_types_follow_the_json_types():
    assert schema.spark_type({"type": ["integer", "null"], "format": "int32"}) == _I
    assert schema.spark_type({"type": "integer"}) == _L
    assert schema.spark_type({"type": ["string", "array"], "items": {"type": "string"}}) == _S
    assert schema.spark_type({"type": "null"}) is None
    assert schema.spark_type({"type": "array", "items": {"type": "boolean"}}) == T.ArrayType(_B)


def test_the_rule_tables_cover_the_address_types_the_trace_names():
    assert rules.TYPES == trace_schema.vocabulary("address_type")
    for matrices in (rules.PRECEDENCE_REPLACE, rules.LOCAL_REMOTE_REPLACE):
        for matrix in matrices.values():
            assert set(matrix) == {(old, new) for old in rules.TYPES for new in rules.TYPES}
    assert set(rules.JUDGED) <= set(trace_schema.vocabulary("policy"))
    assert set(rules.KINDS) <= set(trace_schema.vocabulary("runtime_kind"))
