"""lost-message: every request is answered, or its loss is recorded or explained.

Proves three things (DESIGN: "Never a silent drop: a dropped message or refused entry is a
trace event"), by ``trace_schema/loss.json``, the one specification of what explains a
request without a reply (``analytics.loss`` implements each of its explanations):

- ``lost-request``: a request (a message with a ``msg.out`` of type ``rq``) is answered (a
  ``msg.deliver`` of type ``rp`` with its ``corr``) or explained; else it is a violation.
  ``request_verdicts`` gives every request's verdict (answered, explained with the id of
  the first explanation in loss.json's order that holds, unexplained): the violations are
  exactly its unexplained rows.
- ``duplicate-delivery``: no message is handed to an application twice (two
  ``msg.deliver`` with the same ``msg`` and ``rt``).
- ``vanished-hop``: every ``msg.out`` via a network via (loss.json ``network_vias``) that
  is not a re-send reaches the next hop: a ``msg.in`` or an accounting drop of the same
  ``msg`` and ``hops``, at the receiver or the sender (a send the transport refused).
  Else the hop explanations of its via must explain it. A multicast published to a backend
  is not a hop: its topic may have no subscriber. A hop of a message that was seen again
  further on (a higher hop count) did arrive: its missing receipt is never explained.

Where an unanswered request was last seen decides what may explain it (after
``drop-recorded``, a drop of it or of its reply, which explains any): inside a runtime,
``holder-ended`` (that runtime ended at or after it was last seen, not after its expiry);
on a hop via ws, ``ws-end`` (its sender or a receiver ended while it was in flight) or
``ws-receiver-down`` (one of them was down when it was sent); on a hop via mqtt,
``broker-ended`` and ``broker-down`` (the broker of its GBID, likewise), ``session-lost``
(that broker lost the receiver's session and the hop came before the receiver attached
again) and ``receiver-gone`` (a receiver ended while it was in flight and never started
again). A crash of an MQTT hop's sender, or of a receiver that came back, explains
nothing: the sender's outbox sends again what its broker never acknowledged, and the
broker owes the receiver's persistent session the message. A hop's receivers are the
runtimes that own its MQTT topic, the runtime a ws target names (when one of that id
started), and whoever first received another hop sent to the same target; a hop that
resolves to no runtime has none: only its broker (via ws, its sender) can explain it.

Phase 1 is narrow aggregates per message and per hop (``messages``), and the ends and
attaches (few life and link events); phase 2 joins only the candidates (hashed as the
small side of each join) to judge them and build the details.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..loss import (
    ENDS,
    EXCHANGE,
    HOP,
    OUTSIDE,
    STARTS,
    Evidence,
    ends,
    first_explanations,
    on_the_way,
    outside,
    resubscriptions,
    why_name,
)
from .base import Check, CheckContext, CheckOutput, key, violations
from .messages import MSG_EVENTS, is_, message_events, per_hop, per_message, per_runtime

MULTICAST = "m"
_SEND = [*HOP, "seq", "sent_ts", "target", "via", "gbid", "exp"]  # a hop: its latest send
ANSWERED, EXPLAINED, UNEXPLAINED = "answered", "explained", "unexplained"


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
            F.col("out.ts").alias("sent_ts"), F.col("out.target").alias("target"),
            F.col("out.via").alias("via"), F.col("out.gbid").alias("gbid"), "exp", "to",
            (F.col("max_hops") > F.col("hops")).alias("went_on"),
        )
    )


def _requests(ctx: CheckContext) -> DataFrame:
    """Every request with whether it was answered, whether it or a reply with its corr was
    dropped (an accounting drop), and where the exchange was last seen (``last``; a
    reply's last event when that is at or after the request's, or whenever the request
    was delivered) with that message's expiry (``last_exp``)."""
    pm = per_message(ctx)
    order = F.struct("last.ts", F.coalesce(F.col("last.hops"), F.lit(0)), "last.seq")
    replies = (
        pm.filter((F.col("type") == "rp") & F.col("corr").isNotNull())
        .groupBy("run", "corr")
        .agg(
            F.max("delivered").alias("replied"),
            F.max("dropped").alias("reply_dropped"),
            F.max_by(F.struct("last", "exp"), order).alias("reply"),
        )
    )
    # once the request was delivered its fate is its reply's: a copy that came again later
    # (dropped as a duplicate) says nothing of it
    later = F.col("reply").isNotNull() & (
        (F.col("reply.last.ts") >= F.col("last.ts")) | (F.col("delivered") == 1))
    return (
        pm.filter(F.col("sent_rq") == 1)
        .join(replies, ["run", "corr"], "left")
        .select(
            "run", "msg", "corr", "to",
            (F.coalesce(F.col("replied"), F.lit(0)) == 1).alias("answered"),
            F.greatest(F.col("dropped"), F.coalesce(F.col("reply_dropped"), F.lit(0))).alias("dropped"),
            F.when(later, F.col("reply.last")).otherwise(F.col("last")).alias("last"),
            F.when(later, F.col("reply.exp")).otherwise(F.col("exp")).alias("last_exp"),
        )
    )


def _topics(ctx: CheckContext) -> DataFrame:
    """The MQTT topics each runtime owns, by its starts, and each party outside the run
    serves: few rows."""
    return (
        ctx.of(*STARTS, OUTSIDE).filter(F.col("own_topics").isNotNull())
        .select("run", F.col("target").alias("who"), F.explode("own_topics").alias("topic"))
        .distinct()
    )


def _started(ctx: CheckContext) -> DataFrame:
    """Every runtime or broker that ever started: few rows."""
    return ctx.of(*STARTS).select("run", F.col("target").alias("who")).distinct()


def _delivered_twice(ctx: CheckContext) -> DataFrame:
    # A multicast is delivered once to each of a runtime's receivers: the multicast check
    # judges it per subscription (duplicate-publication).
    multicasts = per_message(ctx).filter(F.col("type") == MULTICAST).select("run", "msg")
    return (per_runtime(ctx).filter(F.col("deliveries") >= 2).select("run", "msg", "rt", "deliveries")
            .join(multicasts, ["run", "msg"], "left_anti"))


def _unanswered(ctx: CheckContext) -> DataFrame:
    """The requests never answered; each last seen on the way with its ``hop`` there: the
    latest send of that message and hop count (``per_hop``), whether or not it arrived."""
    requests = _requests(ctx).filter(~F.col("answered")).drop("answered")
    sends = per_hop(ctx).select(F.col("run").alias("hop_run"), F.col("msg").alias("hop_msg"),
                                F.col("hops").alias("hop_hops"), F.col("out").alias("hop"))
    on_hop = ((F.col("run") == F.col("hop_run")) & (F.col("last.msg") == F.col("hop_msg"))
              & (F.col("last.hops") == F.col("hop_hops")) & on_the_way())
    return requests.join(sends, on_hop, "left").drop("hop_run", "hop_msg", "hop_hops")


def _learned(ctx: CheckContext) -> DataFrame:
    """Per target, every runtime that first received a hop sent to it: few rows."""
    return per_hop(ctx).filter(F.col("receiver").isNotNull()).select(
        "run", F.col("out.target").alias("target"), F.col("receiver").alias("who")).distinct()


def find(ctx: CheckContext) -> dict:
    """Phase 1: the hops that never arrived, the requests never answered (with the hop
    each was last seen on), the messages delivered twice (narrow aggregates of the shared
    message frames), who received what was sent to each target, and the ends, own topics,
    starts and attaches that may explain a loss (few life and link events)."""
    return {
        "lost": _lost_hops(ctx),
        "requests": _unanswered(ctx),
        "twice": _delivered_twice(ctx),
        "learned": _learned(ctx),
        "ends": ends(ctx),
        "topics": _topics(ctx),
        "started": _started(ctx),
        "resubscribed": resubscriptions(ctx),
        "outside": outside(ctx),
    }


# -- phase 2: the hops to judge -------------------------------------------------------
def _request_hops(requests: DataFrame) -> DataFrame:
    """The hop each request last seen on the way was on."""
    return requests.filter(F.col("hop").isNotNull()).select(
        "run", F.col("last.msg").alias("msg"), F.col("last.hops").alias("hops"), F.col("hop.rt").alias("rt"),
        F.col("hop.seq").alias("seq"), F.col("hop.ts").alias("sent_ts"), F.col("hop.target").alias("target"),
        F.col("hop.via").alias("via"), F.col("hop.gbid").alias("gbid"), F.col("last_exp").alias("exp"),
    )


def _receivers(hops: DataFrame, found: dict[str, DataFrame]) -> DataFrame:
    """The runtimes each hop went to: for via mqtt the owners of its target's topic, for
    via ws the runtime the target names when one of that id started (a WebSocketClient
    address names its libjoynr runtime), for any via whoever first received another hop
    sent to its target. A hop that resolves to none has no row. Local frames only."""
    return (
        hops.filter(F.col("via") == "mqtt").withColumn("topic", _topic("target"))
        .join(found["topics"], ["run", "topic"]).select(*HOP, "who")
        .unionByName(hops.filter(F.col("via") == "ws").withColumn("who", F.col("target"))
                     .join(found["started"], ["run", "who"]).select(*HOP, "who"))
        .unionByName(hops.join(found["learned"], ["run", "target"]).select(*HOP, "who"))
        .distinct()
    )


def _until(ctx: CheckContext, hops: DataFrame) -> DataFrame:
    """Per hop, the first arrival of a later send of its sender to its target: from then on
    the link kept order, so the hop was no longer in flight."""
    arrived = per_hop(ctx).filter(F.col("arrived_ts").isNotNull()).select(
        "run", F.col("out.rt").alias("rt"), F.col("out.target").alias("target"),
        F.col("out.seq").alias("later_seq"), "arrived_ts",
    )
    return (
        ctx.small(hops.select(*HOP, "target", "seq"))
        .join(arrived, ["run", "rt", "target"])
        .filter(F.col("later_seq") > F.col("seq"))
        .groupBy(*HOP).agg(F.min("arrived_ts").alias("until"))
    )


def _judge(ctx: CheckContext) -> tuple[DataFrame, DataFrame]:
    """The unanswered requests and the lost hops with ``why``: the index of the first
    explanation that holds (``analytics.loss.IDS``), null when none does."""
    found = ctx.candidates(CHECK)
    requests, lost = found["requests"], found["lost"]
    hops = lost.filter(~F.col("went_on")).select(*_SEND).unionByName(_request_hops(requests)).distinct()
    evidence = Evidence(
        exchanges=requests,
        # the explanations join the hops three times: their overtaking sends are read once
        hops=ctx.local(hops.join(_until(ctx, hops), HOP, "left"))[0],
        receivers=_receivers(hops, found),
        ends=found["ends"],
        resubscriptions=found["resubscribed"],
        outside=found["outside"],
    )
    exchange_why, hop_why = first_explanations(evidence)
    return (requests.join(exchange_why, EXCHANGE, "left"),
            lost.join(hop_why, HOP, "left").withColumn("why", F.when(~F.col("went_on"), F.col("why"))))


def request_verdicts(ctx: CheckContext) -> DataFrame:
    """Every request's verdict: run, msg, outcome (answered, explained, unexplained) and
    why (the id of the first explanation of loss.json that holds, else null). The
    ``lost-request`` violations are exactly the unexplained rows."""
    judged, _ = _judge(ctx)
    answered = _requests(ctx).filter(F.col("answered")).select(
        *EXCHANGE, F.lit(ANSWERED).alias("outcome"), F.lit(None).cast("string").alias("why"))
    return answered.unionByName(judged.select(
        *EXCHANGE,
        F.when(F.col("why").isNull(), F.lit(UNEXPLAINED)).otherwise(F.lit(EXPLAINED)).alias("outcome"),
        why_name("why").alias("why"),
    ))


def verdicts_of_runs(spark: SparkSession, run_dirs: list[str]) -> dict:
    """``{(run id, msg): (outcome, why)}`` for every request of the runs in ``run_dirs``,
    as ``request_verdicts`` judges them."""
    from ..frames import rows_frame
    from ..inputs import find_runs
    from ..load import load
    from ..session import partition_for, tune

    runs = find_runs(run_dirs)
    tune(spark)
    loaded = load(spark, runs)
    partition_for(spark, loaded.stats.events)
    policies = rows_frame(spark, [], "run_dir string, declared string, judged string")  # no check here reads them
    ctx = CheckContext(spark, loaded.events, policies, ev_counts=loaded.ev_counts,
                       declared={str(r.dir): r.policy for r in runs}, messages=loaded.messages)
    try:
        rows = request_verdicts(ctx).collect()
    finally:
        ctx.release()
        loaded.release()
    return {(r["run"], r["msg"]): (r["outcome"], r["why"]) for r in rows}


# -- phase 2: the violations ----------------------------------------------------------
def _lost_requests(ctx: CheckContext, judged: DataFrame) -> DataFrame:
    unexplained = judged.filter(F.col("why").isNull())
    # The trail of each unexplained request: its exchange's events.
    exchange = F.coalesce(F.col("corr"), F.concat(F.lit("msg:"), F.col("msg")))
    wanted = unexplained.select("run", exchange.alias("exchange"))
    exchanges = (message_events(ctx).filter(F.col("type").isin("rq", "rp"))
                 .select("run", exchange.alias("exchange"), F.struct("rt", "seq").alias("ref")))
    trail = (
        ctx.narrowed(exchanges, wanted, "exchange")
        .join(ctx.small(wanted), ["run", "exchange"])
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
            F.lit(": no reply, no drop, nothing in loss.json explains it; last seen "), F.col("last.ev"),
            F.lit(" at "), F.col("last.rt"),
        ),
        details=F.to_json(F.struct("msg", "corr", "to", "last")),
        refs=F.coalesce(F.col("trail"), F.array(F.struct(F.col("last.rt").alias("rt"),
                                                         F.col("last.seq").alias("seq")))),
    )


def _vanished(lost: DataFrame) -> DataFrame:
    unexplained = lost.filter(F.col("why").isNull())
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
            .otherwise(F.lit("no explanation of loss.json for a hop via it holds")),
        ),
        details=F.to_json(F.struct("msg", "hops", "rt", "via", "gbid", "target", "to",
                                   F.col("sent_ts").alias("ts"), "exp",
                                   F.col("went_on").alias("seen_further_on"))),
        refs=F.array(F.struct("rt", "seq")),
    )


def _duplicates(ctx: CheckContext, twice: DataFrame) -> DataFrame:
    delivered = (
        ctx.narrowed(message_events(ctx).filter(is_("msg.deliver")), twice, "msg")
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


def compute(ctx: CheckContext) -> CheckOutput:
    judged, lost = ctx.local(*_judge(ctx))
    out = (
        _lost_requests(ctx, judged)
        .unionByName(_duplicates(ctx, ctx.candidates(CHECK)["twice"]))
        .unionByName(_vanished(lost))
    )
    return CheckOutput(out)


CHECK = Check(
    name="lost-message",
    description=(
        "Every request gets a reply delivered, or what trace_schema/loss.json names explains its "
        "loss: a recorded drop (a duplicate drop accounts for nothing), an end of the runtime "
        "that held it, of a WebSocket hop's ends, or of an MQTT hop's broker while it was in "
        "flight, a broker that lost the receiver's session, a receiver that never came back; no "
        "message is delivered twice; no mqtt/ws hop vanishes without such an explanation."
    ),
    seeds="DESIGN ('Never a silent drop'); trace_schema/loss.json; 000 restart/crash scenarios",
    events=(*MSG_EVENTS, *ENDS, *STARTS, "link.attach"),
    compute=compute,
    find=find,
    judges=MSG_EVENTS,
    leads=("lost", "requests", "twice"),
)
