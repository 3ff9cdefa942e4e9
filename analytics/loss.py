"""What explains a request without a reply, in Spark terms: the checker's implementation
of ``trace_schema/loss.json``.

``loss.json`` is the one specification of what explains a loss; the scenario harness
implements it too, in its own terms, and a differential test feeds both the same traces.
This module takes from it the end and start events, the drop reasons that account for
nothing, the network vias and the causal order of a message's events, and keeps one
Spark implementation per explanation (``EXPLANATIONS``, in the file's order). It refuses
to load when its ids differ from the file's: neither side can learn a new excuse alone.

The explanations, each an ``Explanation``: the evidence frame it judges (an exchange's or
a hop's, built from ``Evidence``) and the condition under which a row of it explains its
key; ``first_explanations`` gives each key the first that holds, in the file's order:

- ``drop-recorded`` (an exchange, keyed run, msg): the request, or a reply with its corr,
  has a ``msg.drop`` whose reason is not one of ``unaccounted_drop_reasons``.
- ``holder-ended`` (an exchange last seen inside a runtime): an end of that runtime at or
  after it was last seen, not after the expiry of the event it was last seen in.
- ``ws-end`` (a hop via ws, keyed run, msg, hops, rt of its sender): an end of the sender
  or of a receiver while the hop was in flight: at or after it was sent, not after its
  expiry, before ``until`` (the first arrival of a later send of the same sender to the
  same target: from then on the link kept order).
- ``ws-receiver-down`` (via ws): the sender or a receiver was down when it was sent: it
  ended before, and its next start (``up_ts``) came after the send, or never.
- ``broker-ended`` (via mqtt): an end of the broker of the hop's GBID while in flight.
- ``broker-down`` (via mqtt): that broker was down when the hop was sent.
- ``session-lost`` (via mqtt): that broker ended at or before the send, and a receiver
  that had attached to it before the end attached again after it with
  ``session_present: false``, after the send.
- ``receiver-gone`` (via mqtt): a receiver ended while in flight and never started again.
  A receiver that starts again resumes its persistent session (the broker owes it the
  message), and a sender's outbox sends again what its broker never acknowledged: neither
  end explains an MQTT hop.
- ``receiver-outside`` (via mqtt): a receiver is outside the run (``life.outside``: a
  discovery service the run uses and does not run), so its arrival is in no trace.

A hop's receivers (``Evidence.receivers``): for via mqtt, every runtime whose start
(``own_topics``) owns the target's topic, and every party outside the run whose
``life.outside`` does; for via ws, the runtime whose id is the target,
when a start has that target (a WebSocketClient address names its libjoynr runtime); for
any via, every runtime that first received another hop sent to the same target. A hop
that resolves to no runtime has no receivers: only its broker (or, via ws, its sender)
can explain it.

Ends, starts and attaches are few rows: the hashed small side of every join here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from trace_schema import loss_explanations, loss_spec

if TYPE_CHECKING:
    from .checks.base import CheckContext

_SPEC = loss_spec()
ENDS: tuple[str, ...] = tuple(_SPEC["ends"])
STARTS: tuple[str, ...] = tuple(_SPEC["starts"])
UNACCOUNTED_DROPS: tuple[str, ...] = tuple(_SPEC["unaccounted_drop_reasons"])
NETWORK: tuple[str, ...] = tuple(_SPEC["network_vias"])  # a hop to another runtime
RANK: dict[str, int] = dict(_SPEC["order"]["rank"])  # within one ts and hop count
NEVER = 2**62  # "no bound" for a time comparison
OUTSIDE = "life.outside"  # a party outside the run and the topics it serves

EXCHANGE = ["run", "msg"]  # the key of a request's exchange
HOP = ["run", "msg", "hops", "rt"]  # the key of a hop: rt is its sender


# -- columns ------------------------------------------------------------------------------
def accounting_drop() -> Column:
    """A drop that records a message's end: a ``msg.drop`` whose reason is not one of
    ``unaccounted_drop_reasons`` (a ``duplicate`` drop is of a second copy: the first
    copy's fate is still owed)."""
    return (F.col("ev") == "msg.drop") & ~F.coalesce(F.col("reason"), F.lit("")).isin(*UNACCOUNTED_DROPS)


def rank() -> Column:
    """The rank of an event within one ts and hop count, as ``order.rank`` gives it."""
    named = [k for k in RANK if k != "other"]
    col = F.when(F.col("ev") == named[0], RANK[named[0]])
    for ev in named[1:]:
        col = col.when(F.col("ev") == ev, RANK[ev])
    return col.otherwise(RANK["other"])


def on_the_way(last: str = "last") -> Column:
    """An exchange last seen in a network send (else: inside the runtime that saw it last)."""
    return F.coalesce((F.col(f"{last}.ev") == "msg.out") & F.col(f"{last}.via").isin(*NETWORK), F.lit(False))


# -- the small frames: ends and attaches ---------------------------------------------------
def ends(ctx: CheckContext) -> DataFrame:
    """Every end (``ends`` of loss.json) of a runtime or broker, including the stops that
    end every run, with ``up_ts``: its first start (``starts``) at or after the end, null
    when it never started again. Few rows."""
    down = ctx.of(*ENDS).select(
        "run", F.col("target").alias("end_who"), F.col("target_kind").alias("end_kind"),
        F.col("gbid").alias("end_gbid"), F.col("ts").alias("end_ts"), F.col("ev").alias("end_ev"),
        F.col("rt").alias("end_rt"), F.col("seq").alias("end_seq"),
    )
    up = ctx.of(*STARTS).select("run", F.col("target").alias("end_who"), F.col("ts").alias("up_ts"))
    return ctx.small(
        down.join(up, ["run", "end_who"], "left")
        .groupBy(*down.columns)
        .agg(F.min(F.when(F.col("up_ts") >= F.col("end_ts"), F.col("up_ts"))).alias("up_ts"))
    )


def resubscriptions(ctx: CheckContext) -> DataFrame:
    """Per broker end and runtime that had attached to that broker's GBID before it: the
    runtime's first ``link.attach`` there at or after the end, by ts then seq (``sub_ts``)
    and whether the broker still held its session (``session_present``). Few rows."""
    broker_ends = ctx.of(*ENDS).filter(F.col("target_kind") == "broker").select(
        "run", F.col("gbid").alias("who_gbid"), F.col("ts").alias("end_ts"))
    attaches = ctx.of("link.attach").filter(F.col("session_present").isNotNull()).select(
        "run", F.col("rt").alias("who"), F.col("gbid").alias("who_gbid"), F.col("ts").alias("sub_ts"),
        "seq", "session_present")
    after = F.col("sub_ts") >= F.col("end_ts")
    return (
        attaches.join(ctx.small(broker_ends), ["run", "who_gbid"])
        .groupBy("run", "who_gbid", "end_ts", "who")
        .agg(
            F.max(F.when(~after, 1).otherwise(0)).alias("had_session"),
            F.min(F.when(after, F.struct("sub_ts", "seq", "session_present"))).alias("first"),
        )
        .filter((F.col("had_session") == 1) & F.col("first").isNotNull())
        .select("run", "who_gbid", "end_ts", "who", "first.sub_ts", "first.session_present")
    )


def outside(ctx: CheckContext) -> DataFrame:
    """The parties the run uses and does not run (``life.outside``): few rows."""
    return ctx.small(ctx.of(OUTSIDE).select("run", F.col("target").alias("who")).distinct())


# -- the explanations --------------------------------------------------------------------
@dataclass(frozen=True)
class Evidence:
    """What the explanations judge; every frame small (candidates, ends, attaches)."""

    exchanges: DataFrame  # run, msg, dropped (1: a drop of it or of its reply), last (where seen)
    hops: DataFrame  # HOP, via, gbid, sent_ts, exp, until (null: never overtaken)
    receivers: DataFrame  # HOP, who: the runtimes the hop went to
    ends: DataFrame  # see ``ends``
    resubscriptions: DataFrame  # see ``resubscriptions``
    outside: DataFrame  # run, who: the parties outside the run (``outside``)


# Each explanation is a condition on one of these frames, built once per judgement (a
# frame per explanation would plan the hops' lineage once per explanation).
def _exchange(e: Evidence) -> DataFrame:
    """Each unanswered request."""
    return e.exchanges


def _holder(e: Evidence) -> DataFrame:
    """Each exchange last seen inside a runtime, with every end of that runtime."""
    inside = e.exchanges.filter(~on_the_way()).select(*EXCHANGE, "last", F.col("last.rt").alias("end_who"))
    return inside.join(e.ends, ["run", "end_who"])


def _parties(e: Evidence) -> DataFrame:
    """Each hop with every end of its sender (``role`` sender) or of one of its receivers
    (``role`` receiver)."""
    who = (e.hops.select(*HOP, F.col("rt").alias("who"), F.lit("sender").alias("role"))
           .unionByName(e.receivers.select(*HOP, "who", F.lit("receiver").alias("role"))))
    return e.hops.join(who, HOP).join(e.ends.withColumnRenamed("end_who", "who"), ["run", "who"])


def _broker(e: Evidence) -> DataFrame:
    """Each hop with every end of the broker of its GBID."""
    brokers = e.ends.filter(F.col("end_kind") == "broker").withColumnRenamed("end_gbid", "gbid")
    return e.hops.join(brokers, ["run", "gbid"])


def _session(e: Evidence) -> DataFrame:
    """Each hop with, per receiver and end of its GBID's broker that the receiver had
    attached to before, the receiver's first attach after that end."""
    return (e.hops.withColumnRenamed("gbid", "who_gbid").join(e.receivers, HOP)
            .join(e.resubscriptions, ["run", "who", "who_gbid"]))


def _outside_receivers(e: Evidence) -> DataFrame:
    """Each hop with every one of its receivers that is outside the run."""
    return e.hops.join(e.receivers, HOP).join(e.outside, ["run", "who"])


def _via(name: str) -> Column:
    return F.col("via") == name


def _in_flight() -> Column:
    """At or after the send, not after the expiry, before ``until``."""
    return (
        (F.col("end_ts") >= F.col("sent_ts"))
        & (F.col("end_ts") <= F.coalesce(F.col("exp"), F.lit(NEVER)))
        & (F.col("end_ts") < F.coalesce(F.col("until"), F.lit(NEVER)))
    )


def _down_when_sent() -> Column:
    """Ended before the send, not started again by then."""
    return (F.col("end_ts") < F.col("sent_ts")) & (F.col("sent_ts") < F.coalesce(F.col("up_ts"), F.lit(NEVER)))


def drop_recorded() -> Column:
    return F.col("dropped") == 1


def holder_ended() -> Column:
    return (F.col("end_ts") >= F.col("last.ts")) & (F.col("end_ts") <= F.coalesce(F.col("last.exp"), F.lit(NEVER)))


def ws_end() -> Column:
    return _via("ws") & _in_flight()


def ws_receiver_down() -> Column:
    return _via("ws") & _down_when_sent()


def broker_ended() -> Column:
    return _via("mqtt") & _in_flight()


def broker_down() -> Column:
    return _via("mqtt") & _down_when_sent()


def session_lost() -> Column:
    return (_via("mqtt") & ~F.col("session_present") & (F.col("end_ts") <= F.col("sent_ts"))
            & (F.col("sent_ts") < F.col("sub_ts")))


def receiver_gone() -> Column:
    return _via("mqtt") & (F.col("role") == "receiver") & F.col("up_ts").isNull() & _in_flight()


def receiver_outside() -> Column:
    return _via("mqtt")


@dataclass(frozen=True)
class Explanation:
    evidence: Callable[[Evidence], DataFrame]  # the frame it judges: an exchange's, or a hop's
    holds: Callable[[], Column]  # where a row of that frame explains its key

    @property
    def on_hop(self) -> bool:
        return self.evidence in _HOP_FRAMES


_HOP_FRAMES = (_parties, _broker, _session, _outside_receivers)

EXPLANATIONS: dict[str, Explanation] = {
    "drop-recorded": Explanation(_exchange, drop_recorded),
    "holder-ended": Explanation(_holder, holder_ended),
    "ws-end": Explanation(_parties, ws_end),
    "ws-receiver-down": Explanation(_parties, ws_receiver_down),
    "broker-ended": Explanation(_broker, broker_ended),
    "broker-down": Explanation(_broker, broker_down),
    "session-lost": Explanation(_session, session_lost),
    "receiver-gone": Explanation(_parties, receiver_gone),
    "receiver-outside": Explanation(_outside_receivers, receiver_outside),
}


def refuse_unless_specified(implemented: tuple[str, ...], specified: tuple[str, ...]) -> None:
    """Raises ImportError, naming both lists, unless they name the same ids in the same order."""
    if implemented != specified:
        raise ImportError(f"analytics.loss implements {list(implemented)}, trace_schema/loss.json specifies "
                          f"{list(specified)}: the two must name the same explanations in the same order")


refuse_unless_specified(tuple(EXPLANATIONS), loss_explanations())
IDS: tuple[str, ...] = tuple(EXPLANATIONS)


def _first(e: Evidence, keys: list[str], hop: bool) -> DataFrame:
    """(keys, why) per key some explanation judging hops (or exchanges) explains: the
    least index in ``IDS`` among those that hold."""
    frames: dict[Callable[[Evidence], DataFrame], list[int]] = {}
    for i, x in enumerate(EXPLANATIONS.values()):
        if x.on_hop == hop:
            frames.setdefault(x.evidence, []).append(i)
    parts = []
    for evidence, ids in frames.items():
        why = F.least(*[F.when(EXPLANATIONS[IDS[i]].holds(), F.lit(i)) for i in ids]) if len(ids) > 1 else \
            F.when(EXPLANATIONS[IDS[ids[0]]].holds(), F.lit(ids[0]))
        parts.append(evidence(e).select(*keys, why.alias("why")).filter(F.col("why").isNotNull()))
    return _union(parts)


def first_explanations(e: Evidence) -> tuple[DataFrame, DataFrame]:
    """Per exchange (run, msg, why) and per hop (HOP, why): the index in ``IDS`` of the
    first explanation that holds, in loss.json's order; keys nothing explains have no row.
    An exchange last seen on a hop (its ``last`` a network send of msg and hops) is
    explained by the hop explanations of that hop, too."""
    hop_why = _first(e, HOP, hop=True).groupBy(*HOP).agg(F.min("why").alias("why"))
    on_hop = e.exchanges.filter(on_the_way()).select(
        *EXCHANGE, F.col("last.msg").alias("hop_msg"), F.col("last.hops").alias("hop_hops"))
    via_hop = on_hop.join(
        hop_why.select("run", F.col("msg").alias("hop_msg"), F.col("hops").alias("hop_hops"), "why"),
        ["run", "hop_msg", "hop_hops"],
    ).select(*EXCHANGE, "why")
    exchange_why = _first(e, EXCHANGE, hop=False).unionByName(via_hop).groupBy(*EXCHANGE).agg(
        F.min("why").alias("why"))
    return exchange_why, hop_why


def why_name(index: str | Column) -> Column:
    """The explanation id of an index into ``IDS`` (null stays null)."""
    col = F.col(index) if isinstance(index, str) else index
    name = F.when(col == 0, F.lit(IDS[0]))
    for i, id_ in enumerate(IDS[1:], 1):
        name = name.when(col == i, F.lit(id_))
    return name  # a CASE: element_at(literals, null) gave the last id, not null, on Spark 4.3


def _union(frames: list[DataFrame]) -> DataFrame:
    out = frames[0]
    for f in frames[1:]:
        out = out.unionByName(f)
    return out


__all__ = [
    "ENDS", "EXCHANGE", "EXPLANATIONS", "Evidence", "Explanation", "HOP", "IDS", "NETWORK", "NEVER",
    "RANK", "STARTS", "UNACCOUNTED_DROPS", "accounting_drop", "ends", "first_explanations", "on_the_way",
    "rank", "refuse_unless_specified", "resubscriptions", "why_name",
]
