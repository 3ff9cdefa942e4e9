"""routing-loop: a message that came back to a runtime that had already routed it.

Proves, per message, three things; any one flags it:

- ``came-back``: no message arrives again (``msg.in``) at a runtime after that runtime
  made a routing decision for it (a ``msg.out`` that is not a ``resent: true`` copy),
  whatever it does next: routes it again, queues it, lets it expire. Arriving again means
  with a higher hop count than the runtime first received it (a copy with the same hop
  count is a re-sent duplicate, dropped as such), or at all at the runtime that first sent
  it. The one return that is no loop is the hairpin: a runtime sends its participant's
  message to its cluster controller, which hands it straight back, and it is delivered.
- ``routed-twice``: no runtime makes the same routing decision for it twice (two decisions
  with the same ``msg``, ``rt`` and ``target``).
- ``hop-limit``: no runtime dropped it for the hop limit (DESIGN: "a runtime drops a
  message whose counter passes a bound ... so a loop ends and is visible").

Seeds: 000, the WebSocketClientAddress paragraph ("must not be overwritten by a global
address which could cause a loop") and the precedence rules that exist to prevent exactly
this. Phase 1 finds the looping messages from narrow aggregates per message and runtime
(``messages``); phase 2, for those only, reports the cycle (the routing runtimes in hop
order, from the first runtime that routed it twice up to its second decision; the whole
path otherwise) and, for each runtime of the cycle, the last ``rt.put`` for the message's
``to`` participant at or before that runtime's last routing of it: the entries that sent
the message round.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from .base import Check, CheckContext, CheckOutput, key, violations
from .messages import MSG_EVENTS, decision, message_events, per_runtime


def _rank() -> F.Column:
    """Within one millisecond and hop count: a send before its receipt, then the rest."""
    return F.when(F.col("ev") == "msg.out", 0).when(F.col("ev") == "msg.in", 1).otherwise(2)


def _flagged(ctx: CheckContext):
    """Phase 1: the (run, msg) of every looping message, with why, from narrow aggregates."""
    rt = per_runtime(ctx)
    originator = F.col("first_decision").isNotNull() & (
        F.col("first_in").isNull() | (F.col("first_in") > F.col("first_decision"))
    )
    came_back = (
        F.col("first_decision").isNotNull() & (F.col("last_in") > F.col("first_decision"))
        & (originator | (F.col("max_in_hops") > F.col("min_in_hops")))
    )
    # The one legitimate return: a runtime sends its own participant's message to its
    # cluster controller, which hands it back for a participant of the same runtime.
    hairpin = (
        originator & (F.col("max_in_hops") == F.col("min_in_hops"))
        & (F.col("min_in_hops") == F.col("first_decision_hops") + 1)
        & (F.coalesce(F.col("last_deliver"), F.lit(-1)) > F.col("last_in"))
    )
    back = rt.filter(came_back & ~hairpin).select("run", "msg", F.lit("came-back").alias("why"))
    hop_limit = rt.filter(F.col("hop_limit") == 1).select("run", "msg", F.lit("hop-limit").alias("why"))
    twice = (
        message_events(ctx).filter(decision())
        .groupBy("run", "msg", "rt", "target").count().filter(F.col("count") >= 2)
        .select("run", "msg", F.lit("routed-twice").alias("why"))
    )
    return back.unionByName(hop_limit).unionByName(twice).groupBy("run", "msg").agg(
        F.sort_array(F.collect_set("why")).alias("why")
    )


def find(ctx: CheckContext) -> dict:
    return {"flagged": _flagged(ctx)}


def compute(ctx: CheckContext) -> CheckOutput:
    flagged = ctx.candidates(CHECK)["flagged"]
    # Phase 2: the paths and routing entries of the flagged messages only.
    hops = ctx.narrowed(message_events(ctx), flagged, "msg").join(ctx.small(flagged), ["run", "msg"])
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
        ctx.small(at_runtime).join(puts, ["run", "crt", "to"])
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
        "No message comes back to a runtime that already routed it (whatever it does next; "
        "a hairpin through the cluster controller excepted), is routed the same way twice by "
        "one runtime or is dropped for the hop limit; reports the cycle and the routing "
        "entries that caused it."
    ),
    seeds="000 (precedence exists to prevent loops: 'could cause a loop'); DESIGN hop counter",
    events=(*MSG_EVENTS, "rt.put"),
    compute=compute,
    find=find,
    judges=MSG_EVENTS,
    leads=("flagged",),
)
