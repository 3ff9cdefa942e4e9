"""lost-message: every request is answered or its loss is recorded or explained.

Proves three things (DESIGN: "Never a silent drop: a dropped message or refused entry is a
trace event"; 000 scenarios: a crashed provider or cluster controller is the only excuse):

- ``lost-request``: a request (type ``rq``, sent with ``msg.out``) has a reply delivered
  (``msg.deliver`` of type ``rp`` with the same ``corr``) or a ``msg.drop`` of the request
  (same ``msg``) or of its reply (type ``rp``, same ``corr``) — unless a ``life.crash`` or
  ``life.stop`` of the runtime where the request or reply was last seen came at or after
  that last event, or one of the broker of the GBID of its last MQTT hop (target
  ``broker-<gbid>``, or target_kind ``broker`` with that ``gbid``) came at or after that hop.
- ``duplicate-delivery``: no message is handed to an application twice (two
  ``msg.deliver`` with the same ``msg`` and ``rt``).
- ``vanished-hop``: every ``msg.out`` via ``mqtt`` or ``ws`` reaches the next hop: a
  ``msg.in`` (or a recorded ``msg.drop``) of the same ``msg`` and ``hops`` at another
  runtime — unless, at or after the ``msg.out``, the sender crashed or stopped, the broker
  of its GBID did, or the receiver did. The receiver is the runtime whose ``own_topics``
  hold the MQTT target's topic, or a runtime that received other messages sent to the
  same target; when the target resolves to no runtime, any runtime's crash or stop after
  the hop counts.

All three come from one grouping of the msg.* events by exchange (the correlation id of a
request and its reply, else the message id), so the bulk of the trace is shuffled once.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .base import Check, CheckContext, CheckOutput, key, violations

_MSG_EVENTS = ("msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop")


def _ends(ctx: CheckContext) -> DataFrame:
    """Crashes and stops: what ends a runtime or a broker."""
    return ctx.of("life.crash", "life.stop").select(
        "run", F.col("target").alias("who"), F.col("target_kind").alias("who_kind"),
        F.col("gbid").alias("who_gbid"), F.col("ts").alias("end_ts"),
    )


def _broker_match(gbid: str) -> Column:
    return (F.col("who") == F.concat(F.lit("broker-"), F.col(gbid))) | (
        (F.col("who_kind") == "broker") & (F.col("who_gbid") == F.col(gbid))
    )


def _last(array: str) -> str:
    """The last element of an SQL array expression, NULL when empty (ANSI-safe)."""
    return f"get({array}, size({array}) - 1)"


def _exchanges(ctx: CheckContext) -> DataFrame:
    """One row per exchange with its events, in (ts, seq) order."""
    exchange = F.coalesce(F.col("corr"), F.concat(F.lit("msg:"), F.col("msg")))
    return (
        ctx.of(*_MSG_EVENTS)
        .filter(F.col("msg").isNotNull())
        .groupBy("run", exchange.alias("exchange"))
        .agg(
            F.sort_array(
                F.collect_list(
                    F.struct("ts", "seq", "rt", "ev", "msg", "type", "hops", "via", "gbid",
                             "target", "to", "corr")
                )
            ).alias("evs")
        )
    )


def _lost_requests(groups: DataFrame, dropped_by_id: DataFrame, ends: DataFrame) -> DataFrame:
    rr = "filter(evs, e -> e.type IN ('rq', 'rp'))"
    lost = (
        groups.select(
            "run", "exchange",
            F.expr(f"get(filter({rr}, e -> e.ev = 'msg.out' AND e.type = 'rq'), 0)").alias("request"),
            F.expr("exists(evs, e -> e.ev = 'msg.deliver' AND e.type = 'rp')").alias("replied"),
            F.expr(f"exists({rr}, e -> e.ev = 'msg.drop')").alias("dropped"),
            F.expr(_last(rr)).alias("last"),
            F.expr(_last(f"filter({rr}, e -> e.ev = 'msg.out' AND e.via = 'mqtt')")).alias("hop"),
            F.expr(f"transform({rr}, e -> struct(e.rt AS rt, e.seq AS seq))").alias("trail"),
        )
        .filter(F.col("request").isNotNull() & ~F.col("replied") & ~F.col("dropped"))
        .withColumn("msg", F.col("request.msg"))
    )
    by_runtime = lost.join(ends, "run").filter(
        (F.col("who") == F.col("last.rt")) & (F.col("end_ts") >= F.col("last.ts"))
    ).select("run", "exchange")
    by_broker = lost.filter(F.col("hop").isNotNull()).join(ends, "run").filter(
        _broker_match("hop.gbid") & (F.col("end_ts") >= F.col("hop.ts"))
    ).select("run", "exchange")
    lost = (
        lost.join(dropped_by_id, ["run", "msg"], "left_anti")
        .join(by_runtime, ["run", "exchange"], "left_anti")
        .join(by_broker, ["run", "exchange"], "left_anti")
    )
    return violations(
        lost,
        run=F.col("run"),
        key=key("run", F.lit("lost-request"), "msg"),
        kind=F.lit("lost-request"),
        summary=F.concat(
            F.lit("request "), F.col("msg"), F.lit(" (corr "),
            F.coalesce(F.col("request.corr"), F.lit("?")), F.lit(") to "),
            F.coalesce(F.col("request.to"), F.lit("?")),
            F.lit(": no reply, no drop; last seen "), F.col("last.ev"), F.lit(" at "), F.col("last.rt"),
        ),
        details=F.to_json(F.struct(
            "msg", F.col("request.corr").alias("corr"), F.col("request.to").alias("to"),
            "last", F.col("hop").alias("last_mqtt_hop"),
        )),
        refs=F.col("trail"),
    )


def _duplicates(groups: DataFrame) -> DataFrame:
    delivered = "filter(evs, e -> e.ev = 'msg.deliver')"
    dup = groups.select(
        "run",
        F.explode(F.expr(
            f"filter({delivered}, d -> size(filter({delivered},"
            " x -> x.msg = d.msg AND x.rt = d.rt)) > 1)"
        )).alias("d"),
    ).groupBy("run", F.col("d.msg").alias("msg"), F.col("d.rt").alias("rt")).agg(
        F.count("*").alias("n"), F.collect_list("d.seq").alias("seqs"), F.first("d.to").alias("to")
    )
    return violations(
        dup,
        run=F.col("run"),
        key=key("run", F.lit("duplicate-delivery"), "msg", "rt"),
        kind=F.lit("duplicate-delivery"),
        summary=F.concat(
            F.lit("message "), F.col("msg"), F.lit(" delivered "), F.col("n").cast("string"),
            F.lit(" times to "), F.coalesce(F.col("to"), F.lit("?")), F.lit(" at "), F.col("rt"),
        ),
        details=F.to_json(F.struct("msg", "rt", "to", F.col("n").alias("deliveries"))),
        refs=F.expr("transform(seqs, s -> struct(rt AS rt, s AS seq))"),
    )


def _vanished(ctx: CheckContext, groups: DataFrame, ends: DataFrame) -> DataFrame:
    sends = "filter(evs, o -> o.ev = 'msg.out' AND o.via IN ('mqtt', 'ws'))"
    arrived = ("exists(evs, e -> e.ev IN ('msg.in', 'msg.drop') AND e.msg = o.msg"
               " AND e.hops = o.hops AND e.rt != o.rt)")
    v = (
        groups.select("run", F.explode(F.expr(f"filter({sends}, o -> NOT {arrived})")).alias("o"))
        .select("run", "o.*")
        .withColumn("topic", F.regexp_extract("target", r"^[^/]*/(.*)$", 1))
    )
    # Who answers at a target address: learned from the hops that did arrive.
    learned = (
        groups.select("run", F.explode(F.expr(
            f"transform(filter({sends}, o -> {arrived}), o -> struct(o.target AS target,"
            " get(filter(evs, e -> e.ev IN ('msg.in', 'msg.drop') AND e.msg = o.msg"
            " AND e.hops = o.hops AND e.rt != o.rt), 0).rt AS who))"
        )).alias("p"))
        .select("run", "p.target", "p.who")
        .filter(F.col("target").isNotNull())
        .distinct()
    )
    topics = (
        ctx.of("life.start", "life.restart").filter(F.col("own_topics").isNotNull())
        .select("run", F.col("target").alias("who"), F.explode("own_topics").alias("topic"))
        .distinct()
    )
    vkey = ["run", "msg", "hops", "rt", "seq"]
    receivers = (
        v.filter(F.col("via") == "mqtt").join(topics, ["run", "topic"]).select(*vkey, "who")
        .unionByName(v.join(learned, ["run", "target"]).select(*vkey, "who"))
    )
    suspects = (
        v.select(*vkey, "ts", F.col("rt").alias("who"))
        .unionByName(receivers.join(v.select(*vkey, "ts"), vkey))
        .unionByName(v.filter(F.col("gbid").isNotNull())
                     .select(*vkey, "ts", F.concat(F.lit("broker-"), F.col("gbid")).alias("who")))
    )
    by_suspect = suspects.join(ends, ["run", "who"]).filter(F.col("end_ts") >= F.col("ts")).select(*vkey)
    by_broker_kind = v.filter(F.col("gbid").isNotNull()).join(ends, "run").filter(
        _broker_match("gbid") & (F.col("end_ts") >= F.col("ts"))
    ).select(*vkey)
    unresolved = v.join(receivers.select(*vkey).distinct(), vkey, "left_anti")
    by_anyone = unresolved.join(ends, "run").filter(
        (F.coalesce(F.col("who_kind"), F.lit("")) != "broker") & (F.col("end_ts") >= F.col("ts"))
    ).select(*vkey)
    unexplained = (
        v.join(by_suspect, vkey, "left_anti")
        .join(by_broker_kind, vkey, "left_anti")
        .join(by_anyone, vkey, "left_anti")
    )
    return violations(
        unexplained,
        run=F.col("run"),
        key=key("run", F.lit("vanished-hop"), "msg", F.col("hops").cast("string"), "rt"),
        kind=F.lit("vanished-hop"),
        summary=F.concat(
            F.lit("message "), F.col("msg"), F.lit(" sent by "), F.col("rt"), F.lit(" via "),
            F.col("via"), F.lit(" to "), F.coalesce(F.col("target"), F.lit("?")),
            F.lit(" (hops "), F.col("hops").cast("string"), F.lit(") never arrived; no crash explains it"),
        ),
        details=F.to_json(F.struct("msg", "hops", "rt", "via", "gbid", "target", "to", "ts")),
        refs=F.array(F.struct("rt", "seq")),
    )


def compute(ctx: CheckContext) -> CheckOutput:
    ends = _ends(ctx)
    groups = _exchanges(ctx).persist()
    dropped_by_id = ctx.of("msg.drop").filter(F.col("msg").isNotNull()).select("run", "msg").distinct()
    out = (
        _lost_requests(groups, dropped_by_id, ends)
        .unionByName(_duplicates(groups))
        .unionByName(_vanished(ctx, groups, ends))
    )
    return CheckOutput(out, cached=[groups])


CHECK = Check(
    name="lost-message",
    description=(
        "Every request gets a reply delivered or a recorded drop, unless a crash/stop of the "
        "runtime or broker where it was last seen explains it; no message is delivered twice; "
        "no mqtt/ws hop vanishes without a crash to explain it."
    ),
    seeds="DESIGN ('Never a silent drop'); 000 restart/crash scenarios",
    events=(*_MSG_EVENTS, "life.crash", "life.stop", "life.start", "life.restart"),
    compute=compute,
)
