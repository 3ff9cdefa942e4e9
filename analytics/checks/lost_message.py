"""lost-message: every request is answered or its loss is recorded or explained.

Proves three things (DESIGN: "Never a silent drop: a dropped message or refused entry is a
trace event"; 000 scenarios: a crashed provider or cluster controller is the only excuse):

- ``lost-request``: a request (type ``rq``, sent with ``msg.out``) has a reply delivered
  (``msg.deliver`` of type ``rp`` with the same ``corr``) or a ``msg.drop`` of the request
  or of its reply. A ``duplicate`` drop is of a second copy and accounts for nothing.
- ``duplicate-delivery``: no message is handed to an application twice (two
  ``msg.deliver`` with the same ``msg`` and ``rt``).
- ``vanished-hop``: every ``msg.out`` via ``mqtt`` or ``ws`` reaches the next hop: a
  ``msg.in`` or a recorded drop of the same ``msg`` and ``hops``, at the receiver or the
  sender (a send the transport refused). A multicast published to a backend is not a hop:
  its topic may have no subscriber.

What excuses a loss (``messages.excused``): a crash or stop that came while the message
could still have been delivered — at or after it was last seen, not after its expiry
(``exp``), and before a later message the same sender sent the same way arrived (links
keep order: once a later message got through, this one was no longer in flight). The
stops that end every run are no different: they explain only messages still in flight.
Whose end counts: for a message last seen inside a runtime, that runtime; for a hop, the
sender, the broker of its GBID, and the receiver — the runtime whose ``own_topics`` hold
the MQTT target's topic, or that received other messages sent to that target, or, when
the target resolves to no runtime, any runtime. A hop of a message that was seen again
further on (a higher hop count) did arrive: its missing receipt is never excused.

One more end explains a hop via MQTT (``messages.lost_session``): a crash or stop of its
GBID's broker that lost the receiver's session. The receiver's first ``link.attach`` after
it says ``session_present: false`` and marks when its subscription was back; a hop sent
from the end until then reached a broker with nobody subscribed to its topic (amqtt keeps
no session across a crash, and a sender that reconnects first flushes what it held). A hop
sent after that attach, or to a receiver whose broker kept the session, is still lost.

Phase 1 is narrow aggregates per message and per hop (``messages``); phase 2 joins only
the candidates (hashed as the small side of each join) to build the details.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .base import Check, CheckContext, CheckOutput, key, violations
from .messages import (
    MSG_EVENTS,
    NETWORK,
    ends,
    excused,
    is_,
    lost_session,
    message_events,
    per_hop,
    per_message,
    per_runtime,
    resubscriptions,
)

_HOP = ["run", "msg", "hops", "rt"]
MULTICAST = "m"


def _topic(target: str | Column) -> Column:
    return F.regexp_extract(target, r"^[^/]*/(.*)$", 1)


def _lost_hops(ctx: CheckContext) -> DataFrame:
    """Every network send of a hop count that never arrived: (run, msg, hops, rt) of the
    sender, with when it was sent, its expiry and whether the message was seen further on."""
    msgs = per_message(ctx).select("run", "msg", "max_hops", "exp", "to", "type")
    # A multicast published to a backend reaches whoever subscribed its topic: maybe nobody.
    fan_out = (F.col("type") == MULTICAST) & (F.col("out.via") == "mqtt")
    return (
        per_hop(ctx).filter(F.col("arrived") == 0)
        .join(msgs, ["run", "msg"]).filter(~fan_out)
        .select(
            "run", "msg", "hops", F.col("out.rt").alias("rt"), F.col("out.seq").alias("seq"),
            F.col("out.ts").alias("ts"), F.col("out.target").alias("target"),
            F.col("out.via").alias("via"), F.col("out.gbid").alias("gbid"), "exp", "to",
            (F.col("max_hops") > F.col("hops")).alias("went_on"),
        )
    )


def _topics(ctx: CheckContext) -> DataFrame:
    """The MQTT topics each runtime owns, by its life events: few rows."""
    return (
        ctx.of("life.start", "life.restart").filter(F.col("own_topics").isNotNull())
        .select("run", F.col("target").alias("who"), F.explode("own_topics").alias("topic"))
        .distinct()
    )


def _arrived(ctx: CheckContext) -> DataFrame:
    return per_hop(ctx).filter(F.col("arrived") == 1).select(
        "run", F.col("out.rt").alias("rt"), F.col("out.target").alias("target"),
        F.col("out.seq").alias("later_seq"), "arrived_ts", "receiver",
    )


def _receivers(ctx: CheckContext, lost: DataFrame, topics: DataFrame) -> DataFrame:
    """The runtimes each lost hop went to: the owner of its MQTT topic, or whoever received
    other messages sent to its target. A hop that resolves to none has no row."""
    learned = (
        _arrived(ctx).join(ctx.small(lost.select("run", "target").distinct()), ["run", "target"])
        .select("run", "target", F.col("receiver").alias("who")).distinct()
    )
    return (
        lost.filter(F.col("via") == "mqtt").withColumn("topic", _topic("target"))
        .join(ctx.small(topics), ["run", "topic"]).select(*_HOP, "who")
        .unionByName(lost.join(learned, ["run", "target"]).select(*_HOP, "who"))
        .distinct()
    )


def _hop_suspects(ctx: CheckContext, lost: DataFrame, receivers: DataFrame) -> DataFrame:
    """Who may have taken each lost hop down, with the time window of its flight."""
    # Overtaken: a later send of the same sender to the same target arrived.
    until = (
        ctx.small(lost.select(*_HOP, "target", "seq"))
        .join(_arrived(ctx), ["run", "rt", "target"])
        .filter(F.col("later_seq") > F.col("seq"))
        .groupBy(*_HOP).agg(F.min("arrived_ts").alias("until"))
    )
    unresolved = lost.join(receivers, _HOP, "left_anti").select(*_HOP, F.lit(None).cast("string").alias("who"))
    nobody = F.lit(None).cast("string")
    suspects = (
        lost.select(*_HOP, F.col("rt").alias("who"), nobody.alias("who_gbid"))
        .unionByName(lost.filter(F.col("gbid").isNotNull()).select(*_HOP, nobody.alias("who"),
                                                                   F.col("gbid").alias("who_gbid")))
        .unionByName(receivers.withColumn("who_gbid", nobody))
        .unionByName(unresolved.withColumn("who_gbid", nobody))
    )
    return (
        suspects.join(lost.select(*_HOP, F.col("ts").alias("from_ts"), "exp"), _HOP)
        .join(until, _HOP, "left")
    )


def _unsubscribed(lost: DataFrame, receivers: DataFrame) -> DataFrame:
    """Each lost hop via MQTT with its receiver, its GBID and when it was sent: what a
    broker that lost the receiver's session may explain (``messages.lost_session``)."""
    return receivers.join(
        lost.filter((F.col("via") == "mqtt") & F.col("gbid").isNotNull())
        .select(*_HOP, F.col("gbid").alias("who_gbid"), F.col("ts").alias("from_ts")),
        _HOP,
    )


def _vanished(lost: DataFrame, hop_excused: DataFrame) -> DataFrame:
    unexplained = lost.join(hop_excused, _HOP, "left_anti")
    return violations(
        unexplained,
        run=F.col("run"),
        key=key("run", F.lit("vanished-hop"), "msg", F.col("hops").cast("string"), "rt"),
        kind=F.lit("vanished-hop"),
        summary=F.concat(
            F.lit("message "), F.col("msg"), F.lit(" sent by "), F.col("rt"), F.lit(" via "),
            F.col("via"), F.lit(" to "), F.coalesce(F.col("target"), F.lit("?")),
            F.lit(" (hops "), F.col("hops").cast("string"), F.lit(") never arrived; "),
            F.when(F.col("went_on"), F.lit("yet it was seen further on"))
            .otherwise(F.lit("no crash or stop while it was in flight explains it")),
        ),
        details=F.to_json(F.struct("msg", "hops", "rt", "via", "gbid", "target", "to", "ts", "exp",
                                   F.col("went_on").alias("seen_further_on"))),
        refs=F.array(F.struct("rt", "seq")),
    )


def _request_candidates(ctx: CheckContext) -> DataFrame:
    """Requests with neither a reply delivered nor a drop of it or of its reply, with
    where they (or their reply, if later) were last seen."""
    pm = per_message(ctx)
    order = F.struct("last.ts", "last.hops", "last.seq")
    replies = (
        pm.filter((F.col("type") == "rp") & F.col("corr").isNotNull())
        .groupBy("run", "corr")
        .agg(
            F.max("delivered").alias("replied"),
            F.max("dropped").alias("reply_dropped"),
            F.max_by("last", order).alias("reply_last"),
        )
    )
    return (
        pm.filter((F.col("type") == "rq") & (F.col("sent_rq") == 1) & (F.col("dropped") == 0))
        .join(replies, ["run", "corr"], "left")
        .filter((F.coalesce("replied", F.lit(0)) == 0) & (F.coalesce("reply_dropped", F.lit(0)) == 0))
        .withColumn(
            "last",
            F.when(F.col("reply_last.ts") >= F.col("last.ts"), F.col("reply_last")).otherwise(F.col("last")),
        )
        .select("run", "msg", "corr", "to", "last")
    )


def _lost_requests(ctx: CheckContext, lost: DataFrame, hop_excused: DataFrame, ends_: DataFrame) -> DataFrame:
    in_transit = (F.col("last.ev") == "msg.out") & F.col("last.via").isin(*NETWORK)
    # Last seen inside a runtime: only that runtime's end explains it.
    inside = lost.filter(~in_transit).select(
        "run", "msg", F.col("last.rt").alias("who"), F.lit(None).cast("string").alias("who_gbid"),
        F.col("last.ts").alias("from_ts"), F.col("last.exp").alias("exp"),
        F.lit(None).cast("long").alias("until"),
    )
    # Last seen on the way to another runtime: explained as that hop is.
    on_the_way = lost.filter(in_transit).select(
        "run", "msg", F.col("last.msg").alias("hop_msg"), F.col("last.hops").alias("hops"),
        F.col("last.rt").alias("rt"),
    ).join(
        hop_excused.withColumnRenamed("msg", "hop_msg"), ["run", "hop_msg", "hops", "rt"], "left_semi"
    ).select("run", "msg")
    explained = excused(inside, ["run", "msg"], ends_).unionByName(on_the_way)
    unexplained = lost.join(explained, ["run", "msg"], "left_anti")
    # Phase 2: the trail of each unexplained request, its exchange's events.
    exchange = F.coalesce(F.col("corr"), F.concat(F.lit("msg:"), F.col("msg")))
    trail = (
        message_events(ctx).filter(F.col("type").isin("rq", "rp"))
        .select("run", exchange.alias("exchange"), F.struct("rt", "seq").alias("ref"))
        .join(ctx.small(unexplained.select("run", exchange.alias("exchange"))), ["run", "exchange"])
        .groupBy("run", "exchange").agg(F.collect_list("ref").alias("trail"))
    )
    found = unexplained.withColumn("exchange", exchange).join(trail, ["run", "exchange"], "left")
    return violations(
        found,
        run=F.col("run"),
        key=key("run", F.lit("lost-request"), "msg"),
        kind=F.lit("lost-request"),
        summary=F.concat(
            F.lit("request "), F.col("msg"), F.lit(" (corr "), F.coalesce(F.col("corr"), F.lit("?")),
            F.lit(") to "), F.coalesce(F.col("to"), F.lit("?")),
            F.lit(": no reply, no drop; last seen "), F.col("last.ev"), F.lit(" at "), F.col("last.rt"),
        ),
        details=F.to_json(F.struct("msg", "corr", "to", "last")),
        refs=F.coalesce(F.col("trail"), F.array(F.struct(F.col("last.rt").alias("rt"),
                                                         F.col("last.seq").alias("seq")))),
    )


def _delivered_twice(ctx: CheckContext) -> DataFrame:
    # A multicast is delivered once to each of a runtime's receivers: the multicast check
    # judges it per subscription (duplicate-publication).
    multicasts = per_message(ctx).filter(F.col("type") == MULTICAST).select("run", "msg")
    return (per_runtime(ctx).filter(F.col("deliveries") >= 2).select("run", "msg", "rt", "deliveries")
            .join(multicasts, ["run", "msg"], "left_anti"))


def _duplicates(ctx: CheckContext, twice: DataFrame) -> DataFrame:
    delivered = (
        message_events(ctx).filter(is_("msg.deliver"))
        .join(ctx.small(twice), ["run", "msg", "rt"])
        .groupBy("run", "msg", "rt")
        .agg(F.first("deliveries").alias("n"), F.collect_list("seq").alias("seqs"), F.max("to").alias("to"))
    )
    return violations(
        delivered,
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


def find(ctx: CheckContext) -> dict:
    """Phase 1: the hops that never arrived, the requests never answered nor dropped, the
    messages delivered twice (narrow aggregates of the shared message frames), and the
    ends and own topics that may explain a loss (few life events)."""
    return {
        "lost": _lost_hops(ctx),
        "requests": _request_candidates(ctx),
        "twice": _delivered_twice(ctx),
        "ends": ends(ctx),
        "topics": _topics(ctx),
        "resubscribed": resubscriptions(ctx),
    }


def compute(ctx: CheckContext) -> CheckOutput:
    found = ctx.candidates(CHECK)
    ends_ = ctx.small(found["ends"])
    lost = found["lost"]
    candidates = lost.filter(~F.col("went_on"))
    receivers = _receivers(ctx, candidates, found["topics"])
    hop_excused = excused(_hop_suspects(ctx, candidates, receivers), _HOP, ends_).unionByName(
        lost_session(_unsubscribed(candidates, receivers), _HOP, ctx.small(found["resubscribed"])))
    out = (
        _lost_requests(ctx, found["requests"], hop_excused, ends_)
        .unionByName(_duplicates(ctx, found["twice"]))
        .unionByName(_vanished(lost, hop_excused))
    )
    return CheckOutput(out)


CHECK = Check(
    name="lost-message",
    description=(
        "Every request gets a reply delivered or a recorded drop (a duplicate drop accounts "
        "for nothing), unless a crash/stop explains it while it was still in flight (before "
        "its expiry, before a later message on the same way arrived), or a broker that lost "
        "the receiver's session got it before the receiver had subscribed again; no message is "
        "delivered twice; no mqtt/ws hop vanishes without such an end to explain it."
    ),
    seeds="DESIGN ('Never a silent drop'); 000 restart/crash scenarios",
    events=(*MSG_EVENTS, "life.crash", "life.stop", "life.start", "life.restart", "link.attach"),
    compute=compute,
    find=find,
)
