"""routing-loop: a message that came back to a runtime that had already routed it.

Proves, per message: no runtime made the same routing decision for it twice (two
``msg.out`` with the same ``msg``, ``rt`` and ``target``: the message came back and took
the same way out again, which is a cycle; a ``resent: true`` out is a re-send after a link
resume, not a decision) and no runtime dropped it with reason ``hop-limit``. A message that
comes back to a runtime whose table changed meanwhile and leaves by another way is a
re-route, not a loop: seed 000 expects exactly that when a provider re-registers while a
proxy in its own runtime still holds the cluster controller's WebSocketAddress (DESIGN: "a runtime drops a
message whose counter passes a bound ... so a loop ends and is visible"). Seeds: 000, the
WebSocketClientAddress paragraph ("must not be overwritten by a global address which could
cause a loop") and the precedence rules that exist to prevent exactly this.

For each looping message it reports the cycle (the routing runtimes in hop order, from the
first runtime that routed it twice up to its second decision; the whole path when only the
hop limit caught it) and, for each runtime of the cycle, the last ``rt.put`` for the
message's ``to`` participant at or before that runtime's last routing of it: the entries
that sent the message round.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from .base import Check, CheckContext, CheckOutput, key, violations


def _rank() -> F.Column:
    """Within one millisecond and hop count: a send before its receipt, then the rest."""
    return F.when(F.col("ev") == "msg.out", 0).when(F.col("ev") == "msg.in", 1).otherwise(2)


def compute(ctx: CheckContext) -> CheckOutput:
    outs = ctx.of("msg.out").filter(F.col("msg").isNotNull())
    decisions = outs.filter(F.coalesce(F.col("resent"), F.lit("false")) != "true")
    twice = (
        decisions.groupBy("run", "msg", "rt", "target").count().filter(F.col("count") >= 2)
        .select("run", "msg").distinct()
        .select("run", "msg", F.lit("routed-twice").alias("why"))
    )
    hop_limit = (
        ctx.of("msg.drop").filter((F.col("reason") == "hop-limit") & F.col("msg").isNotNull())
        .select("run", "msg", F.lit("hop-limit").alias("why"))
    )
    flagged = twice.unionByName(hop_limit).groupBy("run", "msg").agg(
        F.sort_array(F.collect_set("why")).alias("why")
    )

    hops = ctx.of("msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop").join(
        flagged, ["run", "msg"]
    )
    paths = hops.groupBy("run", "msg", "why").agg(
        F.sort_array(
            F.collect_list(
                F.struct(
                    "ts", "hops", _rank().alias("rank"), "seq", "rt", "ev",
                    (F.coalesce(F.col("resent"), F.lit("false")) == "true").alias("resent"),
                    "to",
                )
            )
        ).alias("path")
    )
    loops = (
        paths.withColumn(
            "routers",
            F.expr("transform(filter(path, x -> x.ev = 'msg.out' AND NOT x.resent), x -> x.rt)"),
        )
        .withColumn("to", F.expr("get(filter(path, x -> x.to IS NOT NULL), 0).to"))
        .withColumn(
            "j",
            F.expr(
                "array_min(filter(IF(size(routers) >= 2, sequence(2, size(routers)), array()),"
                " j -> array_contains(slice(routers, 1, j - 1), element_at(routers, j))))"
            ),
        )
        .withColumn(
            "cycle",
            F.expr(
                "IF(j IS NULL, routers, slice(routers,"
                " array_position(routers, element_at(routers, j)),"
                " j - array_position(routers, element_at(routers, j))))"
            ),
        )
    )

    # The routing entry each runtime of the cycle held: its last put before it routed.
    at_runtime = loops.select(
        "run", "msg", "to", F.explode(F.array_distinct("cycle")).alias("crt"), "path"
    ).withColumn(
        "until",
        F.expr("array_max(transform(filter(path, x -> x.rt = crt AND x.ev = 'msg.out'), x -> x.ts))"),
    ).drop("path")
    puts = ctx.of("rt.put").select(
        "run", F.col("rt").alias("crt"), F.col("participant").alias("to"),
        F.col("ts").alias("put_ts"), F.col("seq").alias("put_seq"), "outcome", "entry", "new",
    )
    latest = Window.partitionBy("run", "msg", "crt").orderBy(F.desc("put_ts"), F.desc("put_seq"))
    entries = (
        at_runtime.join(puts, ["run", "crt", "to"])
        .filter(F.col("put_ts") <= F.col("until"))
        .withColumn("n", F.row_number().over(latest))
        .filter(F.col("n") == 1)
        .groupBy("run", "msg")
        .agg(
            F.collect_list(
                F.struct(
                    F.col("crt").alias("rt"), F.col("put_seq").alias("seq"),
                    F.col("put_ts").alias("ts"), "outcome",
                    F.col("entry.type").alias("type"), F.col("entry.addr").alias("addr"),
                    F.col("new.addr").alias("offered"),
                )
            ).alias("entries")
        )
    )
    result = loops.join(entries, ["run", "msg"], "left").withColumn(
        "entries",
        F.coalesce(
            F.col("entries"),
            F.array().cast(
                "array<struct<rt:string,seq:bigint,ts:bigint,outcome:string,type:string,"
                "addr:string,offered:string>>"
            ),
        ),
    )
    cycle_text = F.when(
        F.col("j").isNotNull(),
        F.concat_ws(" -> ", F.concat(F.col("cycle"), F.slice("cycle", 1, 1))),
    ).otherwise(F.concat_ws(" -> ", "cycle"))
    out = violations(
        result,
        run=F.col("run"),
        key=key("run", "msg"),
        kind=F.array_join("why", "+"),
        summary=F.concat(
            F.lit("message "), F.col("msg"), F.lit(" to "), F.coalesce(F.col("to"), F.lit("?")),
            F.lit(" looped: "), cycle_text,
        ),
        details=F.to_json(
            F.struct(
                "msg", "to", "why", "cycle",
                F.col("routers").alias("routed_by"),
                F.col("entries").alias("routing_entries"),
            )
        ),
        refs=F.concat(
            F.expr("transform(path, x -> struct(x.rt AS rt, x.seq AS seq))"),
            F.expr("transform(entries, e -> struct(e.rt AS rt, e.seq AS seq))"),
        ),
    )
    return CheckOutput(out)


CHECK = Check(
    name="routing-loop",
    description=(
        "No message is routed the same way twice by one runtime (two msg.out, same msg, rt "
        "and target, re-sends excluded) or dropped for the hop limit; reports the cycle and "
        "the routing entries that caused it."
    ),
    seeds="000 (precedence exists to prevent loops: 'could cause a loop'); DESIGN hop counter",
    events=("msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop", "rt.put"),
    compute=compute,
)
