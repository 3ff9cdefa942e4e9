"""takeover-storm: runtimes do not keep stealing one broker session from each other.

Proves seed 004's warning ("Especially Link Stealing seems dangerous") did not come true,
and DESIGN's measured paho behaviour ("two clients with one id kick each other about once
a second") did not happen: a key (gbid, client_id) is a violation when the trace has a
``link.takeover-storm`` event for it, or when N (default 5) ``link.steal`` of it fall
within one window (default 10 000 ms: last steal at most that long after the first).
One violation per key, with the runtimes involved: those named by the storm events, and
the runtimes that attached the thief and victim connections of the steals.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from .base import Check, CheckContext, CheckOutput, key, violations

_REF = "array<struct<rt:string,seq:bigint>>"


def compute(ctx: CheckContext) -> CheckOutput:
    n, window_ms = ctx.storm_steals, ctx.storm_window_ms
    owners = (
        ctx.of("link.attach").filter(F.col("conn").isNotNull())
        .select("run", "conn", F.col("rt").alias("owner")).distinct()
    )
    steals = ctx.of("link.steal").select("run", "gbid", "client_id", "conn", "victim", "rt", "seq", "ts")
    in_window = (
        Window.partitionBy("run", "gbid", "client_id").orderBy("ts").rangeBetween(0, window_ms)
    )
    bursts = (
        steals.withColumn("burst", F.count("*").over(in_window))
        .groupBy("run", "gbid", "client_id")
        .agg(
            F.max("burst").alias("burst"),
            F.min(F.when(F.col("burst") >= n, F.col("ts"))).alias("from_ts"),
            F.collect_list(F.struct("rt", "seq")).alias("refs"),
            F.collect_set("conn").alias("conns"),
            F.collect_set("victim").alias("victims"),
            F.collect_set("rt").alias("emitters"),
        )
        .filter(F.col("burst") >= n)
    )
    conns = bursts.select(
        "run", "gbid", "client_id", F.explode(F.array_union("conns", "victims")).alias("conn")
    )
    stealers = (
        conns.join(owners, ["run", "conn"])
        .groupBy("run", "gbid", "client_id")
        .agg(F.collect_set("owner").alias("runtimes"))
    )
    from_steals = bursts.join(stealers, ["run", "gbid", "client_id"], "left").select(
        "run", "gbid", "client_id",
        # without attaches to name the connections' runtimes, the runtimes that recorded the steals
        F.when(F.size(F.coalesce("runtimes", F.array())) > 0, F.col("runtimes"))
        .otherwise(F.col("emitters")).alias("runtimes"),
        F.lit("steals").alias("source"), "burst", "refs",
    )
    from_events = ctx.of("link.takeover-storm").select(
        "run", "gbid", "client_id", F.coalesce("runtimes", F.array().cast("array<string>")).alias("runtimes"),
        F.lit("storm-event").alias("source"), F.col("count").alias("burst"),
        F.array(F.struct("rt", "seq")).cast(_REF).alias("refs"),
    )
    storms = (
        from_steals.unionByName(from_events)
        .groupBy("run", "gbid", "client_id")
        .agg(
            F.sort_array(F.array_distinct(F.flatten(F.collect_list("runtimes")))).alias("runtimes"),
            F.sort_array(F.collect_set("source")).alias("sources"),
            F.max("burst").alias("burst"),
            F.flatten(F.collect_list("refs")).alias("refs"),
        )
    )
    out = violations(
        storms,
        run=F.col("run"),
        key=key("run", "gbid", "client_id"),
        kind=F.array_join("sources", "+"),
        summary=F.concat(
            F.lit("session "), F.col("gbid"), F.lit("/"), F.col("client_id"),
            F.lit(" stolen back and forth ("), F.coalesce(F.col("burst").cast("string"), F.lit("?")),
            F.lit(" takeovers) by "), F.array_join("runtimes", ", "),
        ),
        details=F.to_json(
            F.struct("gbid", "client_id", "runtimes", "sources",
                     F.col("burst").alias("max_takeovers_in_window"),
                     F.lit(n).alias("threshold"), F.lit(window_ms).alias("window_ms"))
        ),
        refs=F.col("refs"),
    )
    return CheckOutput(out)


CHECK = Check(
    name="takeover-storm",
    description=(
        "No broker session is stolen back and forth: no link.takeover-storm event and fewer "
        "than N link.steal of one (gbid, client_id) within the window."
    ),
    seeds="004 (link stealing); DESIGN (paho clients with one id kick each other)",
    events=("link.steal", "link.takeover-storm", "link.attach"),
    compute=compute,
    judges=("link.steal", "link.takeover-storm"),
)
