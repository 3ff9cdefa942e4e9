"""gcd-consistency: what a GCD lookup returns agrees with the directory's own history.

Proves, for each ``gcd.lookup`` result (seed 001):

- ``duplicate-participant``: at most one entry per participant ("GDEs returned from the
  lookup methods have to be unique per participantId"; "GCD always returns only 1 GDE per
  provider / participantId");
- ``foreign-gbid``: every entry is from a GBID the lookup selected ("return only GDEs in
  known BEs, i.e. GBID of address in GDE is part of the GBID list argument"; old lookups
  carry the own GBID as ``gbids``: "return only GDEs registered in the own BE");
- ``removed-registration``: no entry whose registration (participant, gbid) was removed
  (``gcd.remove`` / ``gcd.remove_stale`` ``removed``) before the lookup without a later
  successful ``gcd.add`` of that participant for that GBID before the lookup ("Provider
  (participantId) gets removed for the selected BEs"; removeStale "Unregisters stale
  providers"). Events of two GCD instances in the same millisecond are not ordered, so
  such a removal is not held against the lookup, and an add in the removal's or the
  lookup's millisecond counts as registering again.
"""

from __future__ import annotations

from pyspark.sql import Window
from pyspark.sql import functions as F

from ..schema import GCD_RESULT
from .base import Check, CheckContext, CheckOutput, key, violations


def compute(ctx: CheckContext) -> CheckOutput:
    lookups = (
        ctx.of("gcd.lookup")
        .withColumn("res", F.from_json("result", GCD_RESULT))
        .filter(F.col("res").isNotNull())
        .select("run", "rt", "seq", "ts", "op", "gbids", "participant", "res")
    )
    participants = F.transform("res", lambda x: x["participant"])
    dup = F.filter(
        F.array_distinct(participants),
        lambda p: F.size(F.filter(participants, lambda q: q == p)) > 1,
    )
    foreign = F.filter(
        "res", lambda x: F.col("gbids").isNotNull() & ~F.array_contains(F.col("gbids"), x["gbid"])
    )

    # Per registration (run, participant, gbid), in time order: the latest removal certainly
    # before each lookup entry, and the latest successful add up to the lookup's millisecond.
    pg = ["run", "participant", "gbid"]
    entries = lookups.select(
        "run", "ts", "rt", "seq", F.lit("lookup").alias("what"), F.explode("res").alias("e")
    ).select(*pg[:1], F.col("e.participant").alias("participant"), F.col("e.gbid").alias("gbid"),
             "ts", "rt", "seq", "what")
    removals = (
        ctx.of("gcd.remove", "gcd.remove_stale")
        .filter(F.col("removed").isNotNull())
        .select("run", "ts", "rt", "seq", F.explode("removed").alias("pg"))
        .select("run", F.get("pg", 0).alias("participant"), F.get("pg", 1).alias("gbid"),
                "ts", "rt", "seq", F.lit("remove").alias("what"))
    )
    adds = (
        ctx.of("gcd.add")
        .filter(F.col("error").isNull() & F.col("gbids").isNotNull())
        .select("run", "participant", F.explode("gbids").alias("gbid"), "ts", "rt", "seq",
                F.lit("add").alias("what"))
    )
    history = entries.unionByName(removals).unionByName(adds)
    by_time = Window.partitionBy(*pg).orderBy("ts")
    earlier_ms = by_time.rangeBetween(Window.unboundedPreceding, -1)
    up_to_ms = by_time.rangeBetween(Window.unboundedPreceding, 0)
    same_ms_same_rt = (
        Window.partitionBy(*pg, "ts", "rt").orderBy("seq")
        .rowsBetween(Window.unboundedPreceding, -1)
    )
    removal = F.when(F.col("what") == "remove", F.struct("ts", "rt", "seq"))
    stale = (
        history.withColumn("rm_earlier", F.max(removal).over(earlier_ms))
        .withColumn("rm_same", F.max(removal).over(same_ms_same_rt))
        .withColumn("add_upto", F.max(F.when(F.col("what") == "add", F.col("ts"))).over(up_to_ms))
        .filter(F.col("what") == "lookup")
        .withColumn("rm", F.greatest("rm_earlier", "rm_same"))
        .filter(F.col("rm").isNotNull()
                & (F.col("add_upto").isNull() | (F.col("add_upto") < F.col("rm.ts"))))
        .groupBy("run", "rt", "seq")
        .agg(
            F.sort_array(F.collect_set(F.struct("participant", "gbid"))).alias("stale"),
            F.collect_list(
                F.struct(F.col("rm.rt").alias("rt"), F.col("rm.seq").alias("seq"))
            ).alias("rm_refs"),
        )
    )

    judged = (
        lookups.join(stale, ["run", "rt", "seq"], "left")
        .withColumn("dup", dup)
        .withColumn("foreign", foreign)
        .withColumn(
            "problems",
            F.filter(
                F.array(
                    F.when(F.size("dup") > 0, F.lit("duplicate-participant")),
                    F.when(F.size("foreign") > 0, F.lit("foreign-gbid")),
                    F.when(F.size(F.coalesce("stale", F.array())) > 0, F.lit("removed-registration")),
                ),
                lambda x: x.isNotNull(),
            ),
        )
        .filter(F.size("problems") > 0)
    )
    out = violations(
        judged,
        run=F.col("run"),
        key=key("run", "rt", F.col("seq").cast("string")),
        kind=F.array_join("problems", ","),
        summary=F.concat(
            F.col("rt"), F.lit(" "), F.coalesce(F.col("op"), F.lit("lookup")), F.lit(" gbids "),
            F.coalesce(F.array_join("gbids", ","), F.lit("-")), F.lit(": "),
            F.array_join("problems", ", "),
        ),
        details=F.to_json(
            F.struct(
                "op", "gbids", F.col("res").alias("result"), F.col("dup").alias("duplicates"),
                F.col("foreign").alias("foreign_entries"),
                F.col("stale").alias("removed_registrations"), "problems",
            )
        ),
        refs=F.concat(
            F.array(F.struct("rt", "seq")),
            F.coalesce(F.col("rm_refs"), F.array().cast("array<struct<rt:string,seq:bigint>>")),
        ),
    )
    return CheckOutput(out)


CHECK = Check(
    name="gcd-consistency",
    description=(
        "GCD lookup results hold one entry per participant, only entries of the selected "
        "GBIDs, and no registration removed before the lookup and not added again."
    ),
    seeds="001 (lookup: unique per participantId, only selected GBIDs; remove, removeStale)",
    events=("gcd.lookup", "gcd.add", "gcd.remove", "gcd.remove_stale"),
    compute=compute,
    judges=("gcd.lookup",),
)
