"""link-uniqueness: one broker session is live on at most one connection at a time.

Proves seed 004's "tuple (sourceContainerId, targetContainerId, linkName) MUST be globally
unique. => only active on one connection", applied to broker sessions keyed by
(gbid, client_id): each ``link.attach`` (mode other than ``reject``) starts an attachment
of its ``conn`` that lives until the first of: a ``link.detach`` of that conn, a
``link.steal`` naming it as ``victim``, a ``life.crash``/``life.stop`` of the attaching
runtime, or the end of the run (still live at its last link or life event). Two
attachments of different conns of one key that overlap in time (start of one strictly
before the end of the other) are a violation. Without link events the check passes vacuously and says so.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from .base import Check, CheckContext, CheckOutput, key, violations

_LINK_EVENTS = ("link.attach", "link.detach", "link.steal", "link.resume", "link.recover",
                "link.expire", "link.store", "link.takeover-storm")


def compute(ctx: CheckContext) -> CheckOutput:
    attaches = (
        ctx.of("link.attach")
        .filter((F.coalesce(F.col("mode"), F.lit("")) != "reject") & F.col("conn").isNotNull())
        .select("run", "gbid", "client_id", "conn", "rt", "seq", "ts")
    )
    conn_ends = (
        ctx.of("link.detach").filter(F.col("conn").isNotNull())
        .select("run", "conn", F.col("ts").alias("end_ts"), F.col("rt").alias("end_rt"),
                F.col("seq").alias("end_seq"), "ev")
        .unionByName(
            ctx.of("link.steal").filter(F.col("victim").isNotNull())
            .select("run", F.col("victim").alias("conn"), F.col("ts").alias("end_ts"),
                    F.col("rt").alias("end_rt"), F.col("seq").alias("end_seq"), "ev")
        )
    )
    runtime_ends = ctx.of("life.crash", "life.stop").select(
        "run", F.col("target").alias("rt"), F.col("ts").alias("end_ts"),
        F.col("rt").alias("end_rt"), F.col("seq").alias("end_seq"), "ev",
    )
    # An end of the same runtime with a lower sequence number belongs to an earlier attach.
    after_attach = (F.col("end_ts") >= F.col("ts")) & ~(
        (F.col("end_rt") == F.col("rt")) & (F.col("end_seq") < F.col("seq"))
    )
    by_conn = attaches.join(conn_ends, ["run", "conn"]).filter(after_attach)
    by_runtime = attaches.join(runtime_ends, ["run", "rt"]).filter(after_attach)
    akey = ["run", "gbid", "client_id", "conn", "rt", "seq", "ts"]
    first_end = (
        by_conn.select(*akey, "end_ts", "end_rt", "end_seq", "ev")
        .unionByName(by_runtime.select(*akey, "end_ts", "end_rt", "end_seq", "ev"))
        .groupBy(*akey)
        .agg(
            F.min_by(F.struct("end_ts", "end_rt", "end_seq", "ev"), F.struct("end_ts", "end_seq"))
            .alias("end")
        )
    )
    # Later than every attach: enough to stand for the run's end (a scan of the link and
    # life events only, not of the whole trace).
    run_end = ctx.small(
        ctx.of(*_LINK_EVENTS, "life.start", "life.stop", "life.crash", "life.restart")
        .groupBy("run").agg(F.max("ts").alias("run_end"))
    )
    intervals = (
        attaches.join(first_end, akey, "left")
        .join(run_end, "run")
        # still live at the run's last millisecond: open until just after it
        .withColumn("until", F.coalesce(F.col("end.end_ts"), F.col("run_end") + 1))
        .withColumn("att", F.struct(
            F.col("until"), "conn", "rt", "seq", "ts",
            F.col("end.end_rt").alias("end_rt"), F.col("end.end_seq").alias("end_seq"),
            F.coalesce(F.col("end.ev"), F.lit("run end")).alias("ended_by"),
        ))
    )
    earlier = (
        Window.partitionBy("run", "gbid", "client_id")
        .orderBy("ts", "conn", "seq")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    overlaps = (
        intervals.withColumn("prev", F.max("att").over(earlier))
        .filter(
            F.col("prev").isNotNull()
            & (F.col("prev.until") > F.col("ts"))
            & (F.col("prev.conn") != F.col("conn"))
        )
    )
    pair = F.sort_array(F.array(F.col("prev.conn"), F.col("conn")))
    refs = F.filter(
        F.array(
            F.struct(F.col("prev.rt").alias("rt"), F.col("prev.seq").alias("seq")),
            F.struct(F.col("rt").alias("rt"), F.col("seq").alias("seq")),
            F.struct(F.col("prev.end_rt").alias("rt"), F.col("prev.end_seq").alias("seq")),
            F.struct(F.col("att.end_rt").alias("rt"), F.col("att.end_seq").alias("seq")),
        ),
        lambda r: r["rt"].isNotNull(),
    )
    out = violations(
        overlaps,
        run=F.col("run"),
        key=key("run", "gbid", "client_id", F.array_join(pair, "+")),
        kind=F.lit("two-live-connections"),
        summary=F.concat(
            F.lit("session "), F.col("gbid"), F.lit("/"), F.col("client_id"), F.lit(" live on "),
            F.col("prev.conn"), F.lit(" (") , F.col("prev.rt"), F.lit(") and "), F.col("conn"),
            F.lit(" ("), F.col("rt"), F.lit(") from ts "), F.col("ts").cast("string"),
            F.lit(" to "), F.least(F.col("prev.until"), F.col("until")).cast("string"),
        ),
        details=F.to_json(
            F.struct("gbid", "client_id", F.col("prev").alias("first"), F.col("att").alias("second"),
                     F.col("ts").alias("second_start"))
        ),
        refs=refs,
    )
    return CheckOutput(out)


CHECK = Check(
    name="link-uniqueness",
    description=(
        "A broker session (gbid, client_id) is attached on at most one connection at a time "
        "(attach until detach, steal, crash/stop of its runtime, or run end)."
    ),
    seeds="004 ('MUST be globally unique. => only active on one connection')",
    events=(*_LINK_EVENTS, "life.crash", "life.stop"),
    compute=compute,
    judges=_LINK_EVENTS,
    vacuous="no link events: passes vacuously",
)
