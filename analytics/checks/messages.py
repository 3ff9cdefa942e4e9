"""What the message checks share: the msg.* events grouped by run and message id once.

``routing-loop`` and ``lost-message`` both judge messages. Their first phase is made of
narrow, mostly numeric aggregates per message, per message and runtime, and per message
and hop count; all three group keys start with (run, msg), so one shuffle of the msg.*
events serves every one of them, and the joins between them need no further exchange.
The events and the aggregates are cached for the check run (``CheckContext.shared``):
each is computed once however many checks and branches read it. Their second phase
joins only the few candidates they found back to the events to build details.

What a loss is and what explains one is ``trace_schema/loss.json``: the network vias, the
drops that account for nothing and the causal order of a message's events come from it
(``analytics.loss``, which also holds the explanations).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ..loss import NETWORK, accounting_drop, rank
from .base import CheckContext

MSG_EVENTS = ("msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop")
# The columns of a message event the checks read: what the reading pass keeps of each.
MESSAGE_COLUMNS = ("run", "msg", "rt", "seq", "ts", "ev", "type", "hops", "via", "gbid", "target", "corr",
                   "exp", "reason", "resent", "to")
# The order the reading pass leaves them in within a partition: the aggregates per message
# and per hop count take string maxima and maxima by structs, which Spark aggregates by
# sorting; on input in this order they stream, without a sort of their own.
MESSAGE_ORDER = ("run", "msg", "hops")


def message_events(ctx: CheckContext) -> DataFrame:
    """The msg.* events that name a message, partitioned by (run, msg): every aggregate
    below groups by keys that start with those two. The reading pass leaves them so
    (``CheckContext.messages``); events given as one frame are partitioned here, once per
    check run."""
    if ctx.messages is not None:
        return ctx.messages.filter(F.col("msg").isNotNull())
    return ctx.shared("messages", lambda: (
        ctx.of(*MSG_EVENTS).filter(F.col("msg").isNotNull()).select(*MESSAGE_COLUMNS)
        .repartition("run", "msg")
    ))


def is_(ev: str) -> Column:
    return F.col("ev") == ev


def flag(cond: Column) -> Column:
    """1 where ``cond`` holds, for max() as "any"."""
    return F.when(cond, 1).otherwise(0)


def decision() -> Column:
    """A routing decision: a msg.out that is not the re-send of an earlier one after a link
    resume (that copy has ``resent: true`` and was decided before)."""
    return is_("msg.out") & (F.coalesce(F.col("resent"), F.lit("false")) != "true")


def order() -> Column:
    """Causal order of a message's events (loss.json ``order``): time, then hop count (null
    as 0), then within one hop count a queueing, the send, a delivery or drop at the
    sender, and last the receipt, then sequence number."""
    return F.struct(F.col("ts"), F.coalesce(F.col("hops"), F.lit(0)), rank(), F.col("seq"))


def where_seen() -> Column:
    return F.struct("ts", "rt", "seq", "ev", "hops", "via", "gbid", "target", "exp", "msg")


def per_message(ctx: CheckContext) -> DataFrame:
    """One row per (run, msg): its type, correlation id, expiry, whether it was sent as a
    request, delivered, dropped, its highest hop count and where it was last seen."""
    return ctx.shared("per-message", lambda: message_events(ctx).groupBy("run", "msg").agg(
        F.max("type").alias("type"),
        F.max("corr").alias("corr"),
        F.max("to").alias("to"),
        F.max("exp").alias("exp"),
        F.max(flag(is_("msg.out") & (F.col("type") == "rq"))).alias("sent_rq"),
        F.max(flag(is_("msg.deliver"))).alias("delivered"),
        F.max(flag(accounting_drop())).alias("dropped"),
        F.max("hops").alias("max_hops"),
        F.max_by(where_seen(), order()).alias("last"),
    ))


def per_hop(ctx: CheckContext) -> DataFrame:
    """One row per (run, msg, hops) with a send to another runtime: who sent it where
    (the latest send of that hop count), whether it arrived (a receipt or a recorded drop of
    that hop count, at the receiver or the sender) and when and where it first arrived."""
    net = decision() & F.col("via").isin(*NETWORK)
    sent = F.when(net, F.struct("seq", "rt", "target", "ts", "via", "gbid"))
    received = is_("msg.in")
    return ctx.shared("per-hop", lambda: (
        message_events(ctx).groupBy("run", "msg", "hops")
        .agg(
            F.max(sent).alias("out"),
            F.max(flag(received | accounting_drop())).alias("arrived"),
            F.min(F.when(received, F.col("ts"))).alias("arrived_ts"),
            F.min_by(F.col("rt"), F.when(received, F.struct("ts", "seq"))).alias("receiver"),
        )
        .filter(F.col("out").isNotNull())
    ))


def per_runtime(ctx: CheckContext) -> DataFrame:
    """One row per (run, msg, rt): how often it was delivered there, the runtime's routing
    decisions for it and its receipts there (first and last by sequence number, lowest and
    highest hop count), and whether the runtime dropped it for the hop limit."""
    received = is_("msg.in")
    return ctx.shared("per-runtime", lambda: message_events(ctx).groupBy("run", "msg", "rt").agg(
        F.sum(flag(is_("msg.deliver"))).alias("deliveries"),
        F.max(F.when(is_("msg.deliver"), F.col("seq"))).alias("last_deliver"),
        F.min(F.when(decision(), F.col("seq"))).alias("first_decision"),
        F.min(F.when(decision(), F.col("hops"))).alias("first_decision_hops"),
        F.min(F.when(received, F.col("seq"))).alias("first_in"),
        F.max(F.when(received, F.col("seq"))).alias("last_in"),
        F.min(F.when(received, F.col("hops"))).alias("min_in_hops"),
        F.max(F.when(received, F.col("hops"))).alias("max_in_hops"),
        F.max(flag(is_("msg.drop") & (F.col("reason") == "hop-limit"))).alias("hop_limit"),
    ))
