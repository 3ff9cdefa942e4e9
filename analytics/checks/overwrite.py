"""overwrite-violation: every routing-table decision re-judged against the declared policy.

Proves that each ``rt.put``, ``rt.remove`` and ``rt.purge`` did what the rule set the run
declared (``run.json`` ``policy``) says, using the rule table of ``analytics.rules``:
000 ('it can be replaced only if', 'Precedence of address types', sticky entries 'cannot be
replaced or removed', merge of expiry and sticky), 002 (constraints 2a-2c, 3, 4) and 003
(CREATE/UPDATE/DELETE). A run that declares a policy with no seed rule table is judged
against precedence, the newest seed, and the result says so.

Violations, per event: accepted although the table refuses (``should-refuse:<rule>``, which
includes a sticky entry replaced and a cluster controller taking a route to its own
topic), refused although the table accepts (``should-accept:<rule>``), an accepted put
that did not keep the longest expiry or lost sticky (precedence and local-remote only: 003
has no merge rule), an accepted put that holds something other than the offered address,
a refusal that changed the entry, a remove/purge the table refuses or a refused remove it
allows. Same address means equal ``addr`` and equal ``visible``; 003's UPDATE rule
compares the routing address only. Also, per event:

- ``unjudged``: no row of the rule table matches it (an address type the seeds do not
  name, a missing field, an outcome that is neither an acceptance nor a refusal): a
  decision the checker cannot judge is a finding, never a silent pass;
- ``visible-not-offered``: an accepted put whose entry has another ``visible`` flag than
  the one offered;
- ``old-not-held``: its ``old`` is not the ``entry`` the previous rt.* event of the same
  participant in the same runtime left (a crash, stop, start or restart of the runtime in
  between starts afresh), so its judgement would rest on an entry the table did not hold.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from .. import rules
from ..frames import rows_frame
from ..schema import ENTRY
from .base import Check, CheckContext, CheckOutput, key, violations

_ACCEPTED_PUT = ("created", "replaced", "merged")



def _decided_at() -> F.Column:
    """The time a routing decision was made by the runtime's own clock: its ``now`` where a
    clock skew set that clock off the run's (expiry is judged by it), else the event's time."""
    return F.coalesce(F.col("now"), F.col("ts"))

def _put_table(ctx: CheckContext) -> DataFrame:
    flags = ", ".join(f"{flag} boolean" for flag in rules.PUT_FLAGS)
    schema = (f"judged string, kind string, old_type string, new_type string, {flags}, "
              "expected string, rule string, seed string")
    return rows_frame(ctx.spark, rules.put_rule_rows(), schema)


def _delete_table(ctx: CheckContext) -> DataFrame:
    schema = ("judged string, op string, old_sticky boolean, old_expired boolean, "
              "expected string, rule string, seed string")
    return rows_frame(ctx.spark, rules.delete_rule_rows(), schema)


def _with_policy(ctx: CheckContext, df: DataFrame) -> DataFrame:
    """Each event with the declared and the judged policy of its run directory.

    Looked up in a map of the run directories the driver knows, not joined: a join would
    shuffle every routing-table event by its run directory (no join is broadcast, see
    ``CheckContext.small``). A directory the map does not hold gets nulls, as the left
    join did.
    """
    if ctx.declared is None:
        return df.join(ctx.small(ctx.policies), "run_dir", "left")
    if not ctx.declared:
        return df.withColumn("declared", F.lit(None).cast("string")).withColumn("judged", F.lit(None).cast("string"))

    def lookup(values: dict[str, str | None]) -> Column:
        pairs = [x for d in sorted(values) for x in (F.lit(d), F.lit(values[d]).cast("string"))]
        return F.try_element_at(F.create_map(*pairs), F.col("run_dir"))

    judged = {d: p if p in rules.JUDGED else rules.DEFAULT for d, p in ctx.declared.items()}
    return df.withColumn("declared", lookup(ctx.declared)).withColumn("judged", lookup(judged))


def _problems(*items: Column) -> Column:
    return F.filter(F.array(*items), lambda x: x.isNotNull())


def _judged_puts(ctx: CheckContext) -> DataFrame:
    own = (
        ctx.of("life.start", "life.restart")
        .filter(F.col("own_topics").isNotNull())
        .select("run", F.col("target").alias("rt"), F.explode("own_topics").alias("topic"))
        .groupBy("run", "rt")
        .agg(F.collect_set("topic").alias("own"))
    )
    table_kind = F.col("kind")
    for runtime, kind in rules.TABLE_KIND.items():
        table_kind = F.when(F.col("kind") == runtime, F.lit(kind)).otherwise(table_kind)
    puts = _with_policy(ctx, ctx.of("rt.put").withColumn("kind", table_kind)).join(
        ctx.small(own), ["run", "rt"], "left")
    same_addr = (
        F.col("old").isNotNull()
        & (F.col("old.type") == F.col("new.type"))
        & F.col("old.addr").eqNullSafe(F.col("new.addr"))
    )
    topic = F.regexp_extract(F.col("new.addr"), r"^[^/]*/(.*)$", 1)
    flagged = puts.select(
        "*",
        F.coalesce(F.col("old.type"), F.lit(rules.NONE)).alias("old_type"),
        F.col("new.type").alias("new_type"),
        (same_addr & F.col("old.visible").eqNullSafe(F.col("new.visible"))).alias("same_routing"),
        same_addr.alias("same_addr"),
        F.coalesce(F.col("old.sticky"), F.lit(False)).alias("old_sticky"),
        F.coalesce(F.col("new.sticky"), F.lit(False)).alias("new_sticky"),
        F.coalesce(F.col("origin") == "gcd", F.lit(False)).alias("from_gcd"),
        F.coalesce(F.col("new.expiry") < _decided_at(), F.lit(False)).alias("new_expired"),
        (
            (F.col("kind") == "cluster-controller")
            & (F.col("new.type") == "Mqtt")
            & F.coalesce(F.array_contains(F.col("own"), topic), F.lit(False))
        ).alias("own_topic"),
    )
    judged = flagged.join(
        ctx.small(_put_table(ctx)),
        ["judged", "kind", "old_type", "new_type", *rules.PUT_FLAGS],
        "left",
    )
    accepted = F.col("outcome").isin(*_ACCEPTED_PUT)
    refused = F.col("outcome") == "refused"
    bookkeeping = F.col("judged").isin(*rules.MERGES_BOOKKEEPING) & accepted & F.col("old").isNotNull()
    longest = F.greatest(F.col("old.expiry"), F.col("new.expiry"))
    problems = _problems(
        # No row of the table matches (an unknown address type, a missing field): unjudged
        # is a finding, never a pass.
        F.when(F.col("expected").isNull() | ~(accepted | refused), F.lit("unjudged")),
        F.when(accepted & (F.col("expected") == "refuse"), F.concat(F.lit("should-refuse:"), F.col("rule"))),
        F.when(refused & (F.col("expected") == "accept"), F.concat(F.lit("should-accept:"), F.col("rule"))),
        F.when(bookkeeping & ~F.col("entry.expiry").eqNullSafe(longest), F.lit("expiry-not-max")),
        F.when(
            bookkeeping & (F.col("old_sticky") | F.col("new_sticky"))
            & ~F.coalesce(F.col("entry.sticky"), F.lit(False)),
            F.lit("sticky-lost"),
        ),
        F.when(
            accepted & F.col("expected").isNotNull()
            & ~(F.col("entry.addr").eqNullSafe(F.col("new.addr"))
                & F.col("entry.type").eqNullSafe(F.col("new.type"))),
            F.lit("entry-not-offered"),
        ),
        F.when(accepted & F.col("expected").isNotNull()
               & ~F.col("entry.visible").eqNullSafe(F.col("new.visible")), F.lit("visible-not-offered")),
        F.when(refused & F.col("expected").isNotNull() & ~F.col("entry").eqNullSafe(F.col("old")),
               F.lit("refused-but-changed")),
    )
    return judged.select(
        "run", "rt", "seq", "ev", "participant", "declared", "judged", "outcome", "rule",
        "expected", "seed", "old", "new", "entry", "origin", "own",
        problems.alias("problems"),
    )


def _judged_deletes(ctx: CheckContext) -> DataFrame:
    dels = (
        _with_policy(ctx, ctx.of("rt.remove", "rt.purge")
                     # nothing to remove: judged only by whether the outcome says so
                     .filter(F.col("old").isNotNull() | (F.coalesce(F.col("outcome"), F.lit("")) != "absent"))
                     .drop("op"))  # gcd's field of that name; here the table's op is remove or purge
        .select(
            "*",
            F.regexp_replace("ev", r"^rt\.", "").alias("op"),
            F.coalesce(F.col("old.sticky"), F.lit(False)).alias("old_sticky"),
            F.coalesce(F.col("old.expiry") < _decided_at(), F.lit(False)).alias("old_expired"),
        )
    )
    judged = dels.join(
        ctx.small(_delete_table(ctx)), ["judged", "op", "old_sticky", "old_expired"], "left"
    )
    removed = F.col("outcome") == "removed"
    refused = F.col("outcome").startswith("refused")
    problems = _problems(
        F.when(F.col("expected").isNull() | F.col("old").isNull() | ~(removed | refused), F.lit("unjudged")),
        F.when(removed & (F.col("expected") == "refuse"), F.concat(F.lit("should-refuse:"), F.col("rule"))),
        F.when(refused & (F.col("expected") == "accept"), F.concat(F.lit("should-accept:"), F.col("rule"))),
        F.when(removed & F.col("entry").isNotNull(), F.lit("removed-but-held")),
    )
    return judged.select(
        "run", "rt", "seq", "ev", "participant", "declared", "judged", "outcome", "rule",
        "expected", "seed", "old", F.lit(None).cast(ENTRY).alias("new"),
        "entry", F.lit(None).cast("string").alias("origin"),
        F.lit(None).cast("array<string>").alias("own"), problems.alias("problems"),
    )


def _notes(ctx: CheckContext) -> list[str]:
    notes = []
    declared_by_run = ctx.declared
    if declared_by_run is None:
        declared_by_run = {r["run_dir"]: r["declared"] for r in ctx.policies.collect()}
    for run_dir, declared_policy in declared_by_run.items():
        if declared_policy not in rules.JUDGED:
            declared = "no policy" if declared_policy is None else f"policy {declared_policy!r}"
            notes.append(
                f"{run_dir}: declares {declared}, which no seed rule table describes; "
                f"judged against {rules.DEFAULT} ({rules.SEEDS[rules.DEFAULT]}, the newest seed)"
            )
    return notes


def _old_not_held(ctx: CheckContext) -> DataFrame:
    """The rt.* events whose ``old`` is not the ``entry`` the previous event of the same
    participant in the same runtime left, with what it left. A crash, stop, start or
    restart of the runtime in between starts afresh: no expectation across it."""
    chain = Window.partitionBy("run", "rt", "participant").orderBy("seq")
    mismatched = (
        ctx.of("rt.put", "rt.remove", "rt.purge")
        .select("run", "rt", "seq", "ts", "participant", "old",
                F.lag("entry").over(chain).alias("held"), F.lag("seq").over(chain).alias("held_seq"),
                F.lag("ts").over(chain).alias("held_ts"))
        .filter(F.col("held_seq").isNotNull() & ~F.col("old").eqNullSafe(F.col("held")))
    )
    resets = ctx.small(ctx.of("life.start", "life.restart", "life.crash", "life.stop").select(
        "run", F.col("target").alias("rt"), F.col("rt").alias("reset_rt"),
        F.col("seq").alias("reset_seq"), F.col("ts").alias("reset_ts"),
    ))
    between = F.when(
        F.col("reset_rt") == F.col("rt"),  # written by the runtime itself: its own order
        (F.col("reset_seq") > F.col("held_seq")) & (F.col("reset_seq") < F.col("seq")),
    ).otherwise((F.col("reset_ts") >= F.col("held_ts")) & (F.col("reset_ts") <= F.col("ts")))
    reset = mismatched.join(resets, ["run", "rt"]).filter(between).select("run", "rt", "seq")
    return mismatched.join(reset, ["run", "rt", "seq"], "left_anti").select("run", "rt", "seq", "held", "held_seq")


def _summary():
    """``<rt> <ev> <participant>: <old> -> <new> <outcome> under <the run's policy>; the seed
    (<judged>) refuses|accepts this <op> (<problems>)``: what happened is the run's policy's
    doing, the verdict the seed's, and the two are named apart (a run whose policy has no
    seed table is judged against precedence)."""
    op = F.regexp_replace("ev", r"^rt\.", "")
    verdict = (
        F.when(F.col("expected") == "refuse", F.concat(F.lit("refuses this "), op))
        .when(F.col("expected") == "accept", F.concat(F.lit("accepts this "), op))
        .otherwise(F.concat(F.lit("has no rule for this "), op))
    )
    return F.concat(
        F.col("rt"), F.lit(" "), F.col("ev"), F.lit(" "), F.col("participant"), F.lit(": "),
        F.coalesce(F.col("old.type"), F.lit("none")), F.lit(" -> "),
        F.coalesce(F.col("new.type"), F.lit("-")), F.lit(" "), F.coalesce(F.col("outcome"), F.lit("(no outcome)")),
        F.lit(" under "), F.coalesce(F.col("declared"), F.lit("no declared policy")),
        F.lit("; the seed ("), F.col("judged"), F.lit(") "), verdict,
        F.lit(" ("), F.array_join("problems", ", "), F.lit(")"),
    )


def compute(ctx: CheckContext) -> CheckOutput:
    judged = (
        _judged_puts(ctx).unionByName(_judged_deletes(ctx))
        .join(ctx.small(_old_not_held(ctx)), ["run", "rt", "seq"], "left")
        .withColumn("problems", F.when(
            F.col("held_seq").isNotNull(), F.concat("problems", F.array(F.lit("old-not-held")))
        ).otherwise(F.col("problems")))
    )
    bad = judged.filter(F.size("problems") > 0)
    out = violations(
        bad,
        run=F.col("run"),
        key=key("run", "rt", F.col("seq").cast("string")),
        kind=F.array_join("problems", ","),
        summary=_summary(),
        details=F.to_json(
            F.struct(
                "participant", "declared", "judged", "outcome", "expected", "rule", "seed",
                "origin", "old", "new", "entry", F.col("own").alias("own_topics"), "problems",
                F.col("held").alias("held_before"),
            )
        ),
        refs=F.filter(
            F.array(F.struct("rt", "seq"), F.struct(F.col("rt"), F.col("held_seq").alias("seq"))),
            lambda r: r["seq"].isNotNull(),
        ),
    )
    return CheckOutput(out, _notes(ctx))


CHECK = Check(
    name="overwrite-violation",
    description=(
        "Every rt.put, rt.remove and rt.purge re-judged against the run's declared policy "
        "from the seeds' rule table (runtime kind, existing and new type, sticky, same "
        "address/visibility, origin, expiry, own topics); one no rule matches is unjudged; "
        "each old must be the entry the previous event left."
    ),
    seeds="000 (precedence), 002 constraints 2a-2c, 3, 4 (local-remote), 003 CRUD (gcd-trust)",
    events=("rt.put", "rt.remove", "rt.purge", "life.start", "life.restart"),
    compute=compute,
    judges=("rt.put", "rt.remove", "rt.purge"),
)
