"""What the message checks share: the msg.* events grouped by run and message id once.

``routing-loop`` and ``lost-message`` both judge messages. Their first phase is made of
narrow, mostly numeric aggregates per message, per message and runtime, and per message
and hop count; all three group keys start with (run, msg), so one shuffle of the msg.*
events serves every one of them, and the joins between them need no further exchange.
The events and the aggregates are cached for the check run (``CheckContext.shared``):
each is computed once however many checks and branches read it. Their second phase
joins only the few candidates they found back to the events to build details.

Also here: the ends (crashes and graceful stops) that may explain a loss, and the rules
that decide whether one does (see ``excused`` and ``lost_session``).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from .base import CheckContext

MSG_EVENTS = ("msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop")
NETWORK = ("mqtt", "ws")  # the vias of a hop to another runtime; inprocess stays inside one
_COLUMNS = ("run", "msg", "rt", "seq", "ts", "ev", "type", "hops", "via", "gbid", "target", "corr",
            "exp", "reason", "resent", "to")
NEVER = 2**62  # "no bound" for a time comparison


def message_events(ctx: CheckContext) -> DataFrame:
    """The msg.* events that name a message, partitioned by (run, msg), cached once per
    check run: every aggregate below groups by keys that start with those two."""
    return ctx.shared("messages", lambda: (
        ctx.of(*MSG_EVENTS).filter(F.col("msg").isNotNull()).select(*_COLUMNS)
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


def accounting_drop() -> Column:
    """A drop that records a message's end. A ``duplicate`` drop is of a second copy: the
    first copy's fate is still owed, so it accounts for nothing."""
    return is_("msg.drop") & (F.coalesce(F.col("reason"), F.lit("")) != "duplicate")


def order() -> Column:
    """Causal order of a message's events: time, then hop count, then within one hop count
    a queueing, the send, a delivery or drop at the sender, and last the receipt."""
    rank = (F.when(is_("msg.queue"), 0).when(is_("msg.out"), 1).when(is_("msg.in"), 3).otherwise(2))
    return F.struct(F.col("ts"), F.coalesce(F.col("hops"), F.lit(0)), rank, F.col("seq"))


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


def ends(ctx: CheckContext) -> DataFrame:
    """Crashes and graceful stops of runtimes and brokers, including the stops that end
    every run: what may explain a loss; each with ``up_ts``, when the same runtime or
    broker started again (null: never). Few rows: the small side wherever joined."""
    down = ctx.of("life.crash", "life.stop").select(
        "run", F.col("target").alias("end_who"), F.col("target_kind").alias("end_kind"),
        F.col("gbid").alias("end_gbid"), F.col("ts").alias("end_ts"), F.col("ev").alias("end_ev"),
        F.col("rt").alias("end_rt"), F.col("seq").alias("end_seq"),
    )
    up = ctx.of("life.start", "life.restart").select(
        "run", F.col("target").alias("end_who"), F.col("ts").alias("up_ts"))
    return ctx.small(
        down.join(up, ["run", "end_who"], "left")
        .groupBy(*down.columns)
        .agg(F.min(F.when(F.col("up_ts") >= F.col("end_ts"), F.col("up_ts"))).alias("up_ts"))
    )


def excused(suspects: DataFrame, keys: list[str], ends_: DataFrame) -> DataFrame:
    """The keys of ``suspects`` that an end explains.

    ``suspects`` holds, per lost message or hop, the runtimes or brokers that may have
    taken it down (``who``; a broker also by ``who_gbid``; both null: any runtime, when the
    receiver of a hop is unknown) with ``from_ts`` (when it was last seen), ``exp`` (its
    expiry) and ``until`` (when a later message on the same way got through, else null).
    An end explains the loss only if it came while the message could still have been
    delivered: at or after it was last seen, not after its expiry, and before a later
    message on the same way arrived (then this one was no longer in flight). The stops
    that end every run are ends like any other: they explain only what was in flight. A
    runtime named as ``who`` that was down when the message was last seen (ended before,
    not started again yet) explains it too: it went to a receiver that was not there. So
    does the broker of a hop's GBID that was down when the hop was sent: the sender's
    client holds the publish until the broker is back, and the broker that comes back has
    lost its sessions and subscriptions (amqtt keeps none), so the publish can find no
    subscriber yet.
    """
    anyone = F.col("who").isNull() & F.col("who_gbid").isNull()
    match = (
        (F.col("who") == F.col("end_who"))
        | ((F.col("end_kind") == "broker") & (F.col("end_gbid") == F.col("who_gbid")))
        | (anyone & (F.coalesce(F.col("end_kind"), F.lit("")) != "broker"))
    )
    in_time = (
        (F.col("end_ts") >= F.col("from_ts"))
        & (F.col("end_ts") <= F.coalesce(F.col("exp"), F.lit(NEVER)))
        & (F.col("end_ts") < F.coalesce(F.col("until"), F.lit(NEVER)))
    )
    named = (F.col("who").isNotNull() & (F.col("who") == F.col("end_who"))) | (
        (F.col("end_kind") == "broker") & (F.col("end_gbid") == F.col("who_gbid")))
    down_then = (
        named
        & (F.col("end_ts") < F.col("from_ts"))
        & (F.col("from_ts") < F.coalesce(F.col("up_ts"), F.lit(NEVER)))
    )
    return suspects.join(ends_, "run").filter((match & in_time) | down_then).select(*keys).distinct()


def resubscriptions(ctx: CheckContext) -> DataFrame:
    """Per broker end and runtime that had attached to that broker before it: the runtime's
    first ``link.attach`` on the broker's GBID at or after the end (``sub_ts``: its
    subscription is in place again) and whether the broker still held its session
    (``session_present``). Few rows: broker ends times the runtimes attached to them."""
    broker_ends = ctx.of("life.crash", "life.stop").filter(F.col("target_kind") == "broker").select(
        "run", F.col("gbid").alias("who_gbid"), F.col("ts").alias("end_ts"))
    attaches = ctx.of("link.attach").filter(F.col("session_present").isNotNull()).select(
        "run", F.col("rt").alias("who"), F.col("gbid").alias("who_gbid"), F.col("ts").alias("sub_ts"),
        "session_present")
    after = F.col("sub_ts") >= F.col("end_ts")
    return (
        attaches.join(ctx.small(broker_ends), ["run", "who_gbid"])
        .groupBy("run", "who_gbid", "end_ts", "who")
        .agg(
            F.max(flag(~after)).alias("had_session"),
            F.min(F.when(after, F.struct("sub_ts", "session_present"))).alias("first"),
        )
        .filter((F.col("had_session") == 1) & F.col("first").isNotNull())
        .select("run", "who_gbid", "end_ts", "who", "first.sub_ts", "first.session_present")
    )


def lost_session(hops: DataFrame, keys: list[str], resubs: DataFrame) -> DataFrame:
    """The keys of ``hops`` that a broker which lost the receiver's session explains.

    ``hops`` holds, per lost hop via MQTT, its receiver (``who``: a runtime resolved from
    the hop's target), the GBID it went by (``who_gbid``) and when it was sent
    (``from_ts``). A crash or stop of that GBID's broker after which the receiver's first
    attach said ``session_present: false`` had lost the receiver's session and its
    subscription: a publish that reached the broker before the receiver subscribed again
    found nobody to take it (the broker keeps nothing for an unknown subscriber). So a hop
    sent at or after that end and before that attach is explained. A hop sent after the
    attach is not (the subscription was back), nor one to a receiver whose broker kept the
    session (``session_present: true``: the broker queued it), nor one to a runtime that
    had never attached to that broker before the end (no session to lose).
    """
    return (
        hops.join(resubs, ["run", "who", "who_gbid"])
        .filter(
            ~F.col("session_present")
            & (F.col("from_ts") >= F.col("end_ts"))
            & (F.col("from_ts") < F.col("sub_ts"))
        )
        .select(*keys).distinct()
    )
