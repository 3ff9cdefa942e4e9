"""Variants of the routing table's rules (seeds 000, 002, 003) that no policy breaks:
(name, seed sentence, behaviour); see ``core.variants``. ``apply`` wraps a policy with one.

A variant changes one rule and leaves the rest of the policy it wraps as it is, so a
scenario guarding that rule fails under it while the scenarios of the other rules hold.
Two of them are the seed's own wording where the simulator follows joynr instead
(``seed-create-own-topic``, ``seed-subscriber-route-expiry``): a scenario shows joynr's
behaviour holding and the seed's failing.
"""

from __future__ import annotations

from dataclasses import replace

from .address import MqttAddress, type_name
from .policies import (
    CLUSTER_CONTROLLER,
    LIBJOYNR,
    Decision,
    Origin,
    Policy,
    PrecedencePolicy,
    _merged,
    _replace_allowed,
)
from .router import SUBSCRIBER_ROUTE_EXPIRY_MS

IGNORES_STICKY = "routing:ignores-sticky"
MERGE_TAKES_NEWER = "routing:merge-takes-newer"
MERGE_IGNORES_VISIBILITY = "routing:merge-ignores-visibility"
RUNTIME_KINDS_SWAPPED = "routing:runtime-kinds-swapped"
SEED_CREATE_OWN_TOPIC = "routing:seed-create-own-topic"
SEED_SUBSCRIBER_ROUTE_EXPIRY = "routing:seed-subscriber-route-expiry"

S000 = "000_65e83c7f1cb84fd7.txt"

ROUTING_VARIANTS: tuple[tuple[str, str, str], ...] = (
    (IGNORES_STICKY,
     f"{S000}: 'Sticky Routing Entries (provisioned routing entries) cannot be replaced or removed'; "
     "'removes them (if they are not sticky)'",
     "the sticky flag protects nothing: a sticky entry is replaced, removed and purged like any other "
     "(a merge still carries the flag)"),
    (MERGE_TAKES_NEWER,
     f"{S000}: 'the longest expiryDate from existing and new entry is kept', 'the isSticky flag is set "
     "to true, if it is true in either old or new entry' (002 constraints 3 and 4)",
     "a merge or a replacement keeps the offered entry's expiry date and sticky flag as they are"),
    (MERGE_IGNORES_VISIBILITY,
     f"{S000}: 'a new entry contains the same address and isGloballyVisible flag, only the expiryDateMs "
     "attribute and the isSticky flag are merged'; 'a provider is globally visible when it is registered "
     "globally'",
     "an offer of the address an entry already has is merged whatever its isGloballyVisible flag: the "
     "entry keeps the visibility it had"),
    (RUNTIME_KINDS_SWAPPED,
     f"{S000}: WebSocketAddress 'In libjoynr runtimes, it has precedence over global addresses ... and "
     "WebSocketClientAddress'; 'In cluster controller runtimes, a WebSocketAddress must not overwrite "
     "other address types'",
     "precedence judges by the other runtime kind's order: WebSocket first in a cluster controller, "
     "last in libjoynr (the older seeds, which know no runtime kinds, are unchanged)"),
    (SEED_CREATE_OWN_TOPIC,
     f"{S000}: 'If no Routing Entry for a participantId exists, it is always allowed to create one'",
     "the seed as written: a cluster controller creates a route to its own MQTT topic when it has "
     "none (joynr refuses it first: what is sent there comes back to it)"),
    (SEED_SUBSCRIBER_ROUTE_EXPIRY,
     f"{S000}: a global proxy added from the replyTo address: 'the expiryDate is set according to the "
     "expiryDate of the request message'",
     "the seed as written for subscriptions too: a subscriber's route learned from its subscription "
     "request expires with the request (joynr keeps it for the subscription's life)"),
)

# The TTL of a subscription request (``runtime.subscriptions.SUBSCRIBE_TTL_MS``; a test
# keeps the two equal). A policy sees the route, not the request it was learned from: the
# request's expiry is its TTL from the moment the route is offered, the transit time off.
SUBSCRIPTION_REQUEST_TTL_MS = 30_000


class VariantPolicy(Policy):
    """A policy with one variant applied. The trace records the wrapped policy's name (the
    run's rule set names the variant); what the variant does not change is the policy's."""

    variant: str

    def __init__(self, base: Policy) -> None:
        self.base = base

    @property  # type: ignore[override]
    def name(self) -> str:  # type: ignore[override]
        return self.base.name

    @property  # type: ignore[override]
    def seed(self) -> str:  # type: ignore[override]
        return self.base.seed

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        return self.base.judge_put(runtime_kind, existing, new, origin=origin, own_topics=own_topics, now_ms=now_ms)

    def may_remove(self, entry, now_ms):
        return self.base.may_remove(entry, now_ms)

    def may_purge(self, entry, now_ms):
        return self.base.may_purge(entry, now_ms)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.base.name}+{self.variant})"


def _unstuck(entry):
    return replace(entry, is_sticky=False) if entry is not None and entry.is_sticky else entry


class IgnoresSticky(VariantPolicy):
    variant = IGNORES_STICKY

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        decision = super().judge_put(runtime_kind, existing, new, origin=origin, own_topics=own_topics,
                                     now_ms=now_ms)
        if decision.outcome != "refused" or existing is None or not existing.is_sticky:
            return decision
        # Refused: judged again as if the entry were not sticky, whose flag a merge still carries.
        free = super().judge_put(runtime_kind, _unstuck(existing), new, origin=origin, own_topics=own_topics,
                                 now_ms=now_ms)
        if free.outcome == "refused" or free.entry is None:
            return decision
        return Decision(free.outcome, free.reason, replace(free.entry, is_sticky=True))

    def may_remove(self, entry, now_ms):
        return self.base.may_remove(_unstuck(entry), now_ms)

    def may_purge(self, entry, now_ms):
        return self.base.may_purge(_unstuck(entry), now_ms)


class MergeTakesNewer(VariantPolicy):
    variant = MERGE_TAKES_NEWER

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        decision = super().judge_put(runtime_kind, existing, new, origin=origin, own_topics=own_topics,
                                     now_ms=now_ms)
        if decision.outcome in ("merged", "replaced"):
            return Decision(decision.outcome, decision.reason, new)
        return decision


class MergeIgnoresVisibility(VariantPolicy):
    variant = MERGE_IGNORES_VISIBILITY

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        if existing is not None and existing.address == new.address:
            new = replace(new, is_globally_visible=existing.is_globally_visible)
        return super().judge_put(runtime_kind, existing, new, origin=origin, own_topics=own_topics,
                                 now_ms=now_ms)


# The reasons PrecedencePolicy gives when its replace clause decided (``_replace_allowed``).
_PRECEDENCE_REASONS = frozenset({
    "same-type", "new-inprocess", "remote-to-remote", "libjoynr-to-websocket",
    "libjoynr-remote-to-websocketclient", "cc-to-websocketclient", "cc-websocket-to-remote", "precedence",
})


class RuntimeKindsSwapped(VariantPolicy):
    variant = RUNTIME_KINDS_SWAPPED

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        decision = super().judge_put(runtime_kind, existing, new, origin=origin, own_topics=own_topics,
                                     now_ms=now_ms)
        if not isinstance(self.base, PrecedencePolicy) or decision.reason not in _PRECEDENCE_REASONS:
            return decision
        other = LIBJOYNR if runtime_kind == CLUSTER_CONTROLLER else CLUSTER_CONTROLLER
        rule = _replace_allowed(other, type_name(existing.address), type_name(new.address))
        if rule is None:
            return Decision("refused", "precedence", existing)
        return Decision("replaced", rule, _merged(existing, new))


class SeedCreateOwnTopic(VariantPolicy):
    variant = SEED_CREATE_OWN_TOPIC

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        if (existing is None and runtime_kind == CLUSTER_CONTROLLER and isinstance(new.address, MqttAddress)
                and new.address.topic in own_topics):
            return Decision("created", "new-participant", new)
        return super().judge_put(runtime_kind, existing, new, origin=origin, own_topics=own_topics,
                                 now_ms=now_ms)


class SeedSubscriberRouteExpiry(VariantPolicy):
    variant = SEED_SUBSCRIBER_ROUTE_EXPIRY

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        # Only a subscription request teaches a route that does not expire (``router.learned_expiry``).
        if origin == Origin.REPLY_TO and new.expiry_date_ms >= SUBSCRIBER_ROUTE_EXPIRY_MS:
            new = replace(new, expiry_date_ms=now_ms + SUBSCRIPTION_REQUEST_TTL_MS)
        return super().judge_put(runtime_kind, existing, new, origin=origin, own_topics=own_topics,
                                 now_ms=now_ms)


_WRAPPERS: dict[str, type[VariantPolicy]] = {
    cls.variant: cls
    for cls in (IgnoresSticky, MergeTakesNewer, MergeIgnoresVisibility, RuntimeKindsSwapped, SeedCreateOwnTopic,
                SeedSubscriberRouteExpiry)
}
if set(_WRAPPERS) != {name for name, _, _ in ROUTING_VARIANTS}:  # pragma: no cover - a programming error
    raise AssertionError("every routing variant needs its wrapper, and only those")


def apply(policy: Policy, variant: str) -> Policy:
    """``policy`` with the routing variant ``variant`` applied."""
    wrapper = _WRAPPERS.get(variant)
    if wrapper is None:
        raise ValueError(f"no routing variant {variant!r}; choose one of {', '.join(_WRAPPERS)}")
    return wrapper(policy)
