"""The generator's step kinds beyond providers, proxies, calls and the runtimes' lifecycle:
subscriptions and multicast receivers, publications, link faults and clock skews.

Each maker draws a step that fits the world as it stands (``generate.World``), or None:
a subscription only on a live proxy of joynrsim/Counter, a publication only by a provider
registered in its runtime's current life, a heal only of a link with a fault, a skew only
of a runtime that runs.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ..scenario.schema import schema

if TYPE_CHECKING:  # pragma: no cover
    from .generate import World

COUNTER = "joynrsim/Counter"
# A multicast receiver's partitions: none, any number, one that no publication of the
# counter carries (a receiver that is added and routed but never reached), and a prefix.
PARTITIONS = ([], ["*"], ["p1"], ["p1", "*"])
DELAYS_MS = (20, 200, 500)  # short: on a real broker a delay costs its time in every hop
SKEWS_MS = (-60_000, -5_000, -1_000, 0, 1_000, 5_000, 60_000)  # around the TTLs; 0 ends a skew
EXPECT_TIMEOUT_MS = 2_000


def schema_knows(kind: str) -> bool:
    """Whether the scenario format has a step kind (one being added switches on when it lands)."""
    return kind in schema()["properties"]["steps"]["items"]["properties"]


def subscribe(rng: random.Random, w: World) -> dict | None:
    """An attribute subscription (its value first, then each change) or one to the
    selective broadcast, with a filter."""
    live = w.live_proxies(COUNTER)
    if not live:
        return None
    proxy, name = rng.choice(live), w.name("sub")
    args: dict[str, Any] = {"proxy": proxy, "name": name}
    if rng.random() < 0.6:
        args["attribute"], what = "value", "attribute"
    else:
        args["broadcast"], what = "reachedMultiple", "broadcast"
        args["filter"] = {"every": rng.choice((1, 2))}
    if rng.random() < 0.2:  # one that ends while the schedule runs
        args["qos"] = {"expiry_ms": rng.choice((2_000, 60_000))}
    w.subscriptions[name] = (proxy, what)
    return {"subscribe": args}


def multicast(rng: random.Random, w: World) -> dict | None:
    """A subscription to the non-selective broadcast: a multicast receiver of the proxy's
    runtime at its cluster controller (and a topic at the broker, for a global provider)."""
    live = w.live_proxies(COUNTER)
    if not live:
        return None
    proxy, name = rng.choice(live), w.name("mc")
    args: dict[str, Any] = {"proxy": proxy, "name": name, "broadcast": "incremented"}
    partitions = rng.choice(PARTITIONS)
    if partitions:
        args["partitions"] = list(partitions)
    w.subscriptions[name] = (proxy, "multicast")
    return {"subscribe": args}


def _live_subscriptions(w: World, what: str | None = None) -> list[str]:
    live = set(w.live_proxies(COUNTER))
    return [n for n, (proxy, kind) in w.subscriptions.items() if proxy in live and what in (None, kind)]


def unsubscribe(rng: random.Random, w: World) -> dict | None:
    names = _live_subscriptions(w)
    if not names:
        return None
    name = rng.choice(names)
    del w.subscriptions[name]
    return {"unsubscribe": {"subscription": name}}


def publish(rng: random.Random, w: World) -> dict | None:
    """The counter counts where it runs: its attribute changes, both broadcasts fire."""
    live = w.live_providers(COUNTER)
    if not live:
        return None
    args: dict[str, Any] = {"provider": rng.choice(live), "method": "increment"}
    if rng.random() < 0.3:
        args["count"] = 2
    return {"publish": args}


def expect_publications(rng: random.Random, w: World) -> dict | None:
    """An attribute subscription has had a publication: its first value, at least."""
    names = _live_subscriptions(w, "attribute")
    if not names:
        return None
    return {"expect_publications": {"subscription": rng.choice(names), "at_least": 1,
                                    "timeout_ms": EXPECT_TIMEOUT_MS}}


def link_fault(rng: random.Random, w: World) -> dict | None:
    """A fault on a link without one, or the heal of one with one."""
    runtime, gbid = rng.choice(w.links())
    args: dict[str, Any] = {"runtime": runtime, **({"gbid": gbid} if gbid is not None else {})}
    if (runtime, gbid) in w.faults:
        del w.faults[(runtime, gbid)]
        return {"heal": args}
    kind = rng.choice(("partition", "blackhole", "delay"))
    if kind == "delay":
        args["ms"] = rng.choice(DELAYS_MS)
        if rng.random() < 0.3:
            args["jitter_ms"] = rng.choice(DELAYS_MS)
    w.faults[(runtime, gbid)] = kind
    return {kind: args}


def clock_skew(rng: random.Random, w: World) -> dict | None:
    """A runtime's clock off by a second to a minute either way, about the TTLs: it stamps
    and judges expiry dates by it."""
    up = [rt for rt in w.runtimes if w.up[rt]]
    if not up:
        return None
    return {"clock_skew": {"runtime": rng.choice(up), "ms": rng.choice(SKEWS_MS)}}
