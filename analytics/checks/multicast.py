"""multicast: multicasts and subscription publications go where joynr's rules send them.

Proves three things; each is a kind of violation:

- ``multicast-loop``: no multicast (type ``m``) arrives over MQTT (``msg.in``) at a runtime
  that had published it to the backend (a ``msg.out`` via ``mqtt`` that is not a re-sent
  copy), with a hop count at least the one it published: joynr's cluster controller never
  publishes again what it received from a backend, so a multicast that comes back was
  echoed (the ``republish_received_multicasts`` rule set).
- ``duplicate-publication``: no subscription is handed one publication or multicast twice
  (two ``sub.publication`` with outcome ``delivered`` of the same ``sid`` and ``msg`` in one
  runtime).
- ``invisible-global-multicast``: no multicast of a provider that was not globally visible
  where it fired (``mc.fire`` with ``visible: false``) is published to a backend (000:
  isGloballyVisible "is required for the routing of multicast publications").

Seeds: 000 (isGloballyVisible and multicasts); joynr's multicast echo guard.
"""

from __future__ import annotations

from pyspark.sql import functions as F

from .base import Check, CheckContext, CheckOutput, key, ref, violations
from .messages import decision, is_

MULTICAST = "m"


def compute(ctx: CheckContext) -> CheckOutput:
    over_mqtt = ctx.of("msg.out", "msg.in").filter(
        (F.col("type") == MULTICAST) & (F.col("via") == "mqtt") & F.col("msg").isNotNull()
    ).select("run", "msg", "rt", "seq", "ts", "ev", "hops", "resent")
    published = over_mqtt.filter(decision()).groupBy("run", "msg", "rt").agg(
        F.min(F.struct("hops", "ts", "seq")).alias("first_out"), F.count("*").alias("publications")
    )
    came_back = (
        over_mqtt.filter(is_("msg.in")).join(published, ["run", "msg", "rt"])
        .filter(F.col("hops") >= F.col("first_out.hops"))
        .groupBy("run", "msg", "rt", "first_out", "publications")
        .agg(F.count("*").alias("returns"), F.min(F.struct("ts", "seq")).alias("first_back"))
    )
    loops = violations(
        came_back,
        run=F.col("run"),
        key=key("run", "msg", "rt"),
        kind=F.lit("multicast-loop"),
        summary=F.concat(
            F.lit("multicast "), F.col("msg"), F.lit(" published by "), F.col("rt"),
            F.lit(" came back to it "), F.col("returns").cast("string"), F.lit(" times over MQTT"),
        ),
        details=F.to_json(F.struct(
            "msg", F.col("rt").alias("publisher"), "returns", "publications",
            F.col("first_out.hops").alias("published_with_hops"),
        )),
        refs=F.array(ref(F.col("rt"), F.col("first_out.seq")), ref(F.col("rt"), F.col("first_back.seq"))),
    )

    delivered = ctx.of("sub.publication").filter(F.col("outcome") == "delivered")
    twice = delivered.groupBy("run", "rt", "sid", "msg").agg(
        F.count("*").alias("deliveries"), F.collect_list(F.struct("rt", "seq")).alias("refs")
    ).filter(F.col("deliveries") >= 2)
    duplicates = violations(
        twice,
        run=F.col("run"),
        key=key("run", "rt", "sid", "msg"),
        kind=F.lit("duplicate-publication"),
        summary=F.concat(
            F.lit("publication "), F.col("msg"), F.lit(" delivered "), F.col("deliveries").cast("string"),
            F.lit(" times to subscription "), F.col("sid"), F.lit(" in "), F.col("rt"),
        ),
        details=F.to_json(F.struct("msg", "sid", "rt", "deliveries")),
        refs=F.col("refs"),
    )

    invisible = ctx.of("mc.fire").filter(F.col("visible") == F.lit(False)).select(
        "run", "msg", F.col("provider"), F.col("rt").alias("fired_in"), F.col("seq").alias("fire_seq"),
    )
    leaked = (
        over_mqtt.filter(decision()).join(invisible, ["run", "msg"])
        .groupBy("run", "msg", "provider", "fired_in", "fire_seq")
        .agg(F.collect_set("rt").alias("publishers"), F.min(F.struct("rt", "seq")).alias("first_out"))
    )
    global_invisible = violations(
        leaked,
        run=F.col("run"),
        key=key("run", "msg"),
        kind=F.lit("invisible-global-multicast"),
        summary=F.concat(
            F.lit("multicast "), F.col("msg"), F.lit(" of provider "), F.col("provider"),
            F.lit(", not globally visible, published to a backend by "),
            F.array_join(F.sort_array("publishers"), ", "),
        ),
        details=F.to_json(F.struct("msg", "provider", "fired_in", F.sort_array("publishers").alias("publishers"))),
        refs=F.array(ref(F.col("fired_in"), F.col("fire_seq")), ref(F.col("first_out.rt"), F.col("first_out.seq"))),
    )
    return CheckOutput(loops.unionByName(duplicates).unionByName(global_invisible))


CHECK = Check(
    name="multicast",
    description=(
        "No multicast comes back over MQTT to a runtime that published it (an echo), no "
        "subscription is handed one publication twice, and no multicast of a provider that "
        "is not globally visible is published to a backend."
    ),
    seeds="000 (isGloballyVisible: routing of multicast publications); joynr's multicast echo guard",
    events=("msg.out", "msg.in", "sub.publication", "mc.fire"),
    compute=compute,
    judges=("msg.out", "msg.in", "sub.publication", "mc.fire"),
)
