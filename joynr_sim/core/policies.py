"""The routing-entry rule sets of the seeds, one small object each.

A policy judges one ``put`` against the entry the table already holds and returns the
decision with the entry the table will hold afterwards. It also says which entries
``remove`` and ``purge_expired`` may take away. Policies are pure: the table hands them
everything they need (runtime kind, the runtime's own MQTT topics, the time).

- ``precedence``: ``000_65e83c7f1cb84fd7.txt`` (the newest seed, the default).
- ``local-remote``: ``002_ed27daa13e583359.txt`` constraints 2a-2c, 3, 4.
- ``gcd-trust``: ``003_6b6ea9fcba272a2c.txt`` CREATE/UPDATE/DELETE rules.
- ``last-writer-wins``: always replace, the naive baseline no seed describes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, ClassVar

from .address import REMOTE_TYPES, AddressType, MqttAddress, type_name

if TYPE_CHECKING:  # pragma: no cover
    from .routing import RoutingEntry

CLUSTER_CONTROLLER = "cluster-controller"
LIBJOYNR = "libjoynr"
RUNTIME_KINDS = (CLUSTER_CONTROLLER, LIBJOYNR)


class Origin(StrEnum):
    """Where a routing-entry put comes from. gcd-trust trusts only ``GCD``; the other
    policies ignore it. A member is a str, so callers may pass the plain value."""

    PROVISIONED = "provisioned"  # configured at start, sticky
    REGISTRATION = "registration"  # a provider or proxy of this runtime
    ROUTING_PROVIDER = "routing-provider"  # addNextHop from a libjoynr runtime
    GCD = "gcd"  # a global discovery result
    DISCOVERY = "discovery"  # a local result of a libjoynr runtime's lookup
    REPLY_TO = "reply-to"  # the replyTo of an incoming request
    LOCAL = "local"  # anything else a runtime adds itself


@dataclass(frozen=True)
class Decision:
    outcome: str  # created | replaced | merged | refused
    reason: str
    entry: RoutingEntry | None  # what the table holds afterwards


def _merged(existing: RoutingEntry, new: RoutingEntry) -> RoutingEntry:
    """Seed rule: the longest expiry is kept; sticky if either is sticky."""
    return replace(
        new,
        expiry_date_ms=max(existing.expiry_date_ms, new.expiry_date_ms),
        is_sticky=existing.is_sticky or new.is_sticky,
    )


def _same_routing(existing: RoutingEntry, new: RoutingEntry) -> bool:
    return existing.address == new.address and existing.is_globally_visible == new.is_globally_visible


class Policy:
    name: ClassVar[str]
    seed: ClassVar[str]

    def judge_put(
        self,
        runtime_kind: str,
        existing: RoutingEntry | None,
        new: RoutingEntry,
        *,
        origin: Origin,
        own_topics: frozenset[str],
        now_ms: int,
    ) -> Decision:
        raise NotImplementedError

    def may_remove(self, entry: RoutingEntry, now_ms: int) -> bool:
        return not entry.is_sticky

    def may_purge(self, entry: RoutingEntry, now_ms: int) -> bool:
        return entry.expiry_date_ms < now_ms and not entry.is_sticky


def _replace_allowed(runtime_kind: str, old: str, new: str) -> str | None:
    """The replace clause of 000: the name of the rule that allows old -> new, or None."""
    if old == new:
        return "same-type"
    if new == AddressType.IN_PROCESS:
        return "new-inprocess"
    if old in REMOTE_TYPES and new in REMOTE_TYPES:
        return "remote-to-remote"
    if runtime_kind == LIBJOYNR:
        if new == AddressType.WEB_SOCKET and (old == AddressType.WEB_SOCKET_CLIENT or old in REMOTE_TYPES):
            return "libjoynr-to-websocket"
        if new == AddressType.WEB_SOCKET_CLIENT and old in REMOTE_TYPES:
            return "libjoynr-remote-to-websocketclient"
    else:
        if new == AddressType.WEB_SOCKET_CLIENT and (old == AddressType.WEB_SOCKET or old in REMOTE_TYPES):
            return "cc-to-websocketclient"
        if old == AddressType.WEB_SOCKET and new in REMOTE_TYPES:
            return "cc-websocket-to-remote"
    return None


class PrecedencePolicy(Policy):
    """000: InProcess > WebSocketClient > Mqtt/Channel (> WebSocket) in a cluster controller,
    InProcess > WebSocket > WebSocketClient > Mqtt/Channel in libjoynr; sticky entries are
    never replaced or removed; same address and visibility merge only."""

    name = "precedence"
    seed = "000_65e83c7f1cb84fd7.txt: 'it can be replaced only if', 'Precedence of address types'"

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        # A route to one of the runtime's own topics would send the message back to itself.
        if (
            runtime_kind == CLUSTER_CONTROLLER
            and isinstance(new.address, MqttAddress)
            and new.address.topic in own_topics
        ):
            return Decision("refused", "own-address", existing)
        if existing is None:
            return Decision("created", "new-participant", new)
        if _same_routing(existing, new):
            return Decision("merged", "same-address", _merged(existing, new))
        if existing.is_sticky:
            return Decision("refused", "sticky", existing)
        rule = _replace_allowed(runtime_kind, type_name(existing.address), type_name(new.address))
        if rule is None:
            return Decision("refused", "precedence", existing)
        return Decision("replaced", rule, _merged(existing, new))


class LocalRemotePolicy(Policy):
    """002: replace only local->local, remote->local, remote->remote (2a-2c); a replace keeps
    the longest expiry (3) and sticky if either is (4). Sticky only protects from purge."""

    name = "local-remote"
    seed = "002_ed27daa13e583359.txt: operational constraints 2a-2c, 3, 4"

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        if existing is None:
            return Decision("created", "new-participant", new)
        if _same_routing(existing, new):
            return Decision("merged", "same-address", _merged(existing, new))
        old_remote = type_name(existing.address) in REMOTE_TYPES
        new_remote = type_name(new.address) in REMOTE_TYPES
        if not old_remote and new_remote:
            return Decision("refused", "local-over-remote", existing)
        rule = {
            (False, False): "local-to-local",
            (True, False): "remote-to-local",
            (True, True): "remote-to-remote",
        }[(old_remote, new_remote)]
        return Decision("replaced", rule, _merged(existing, new))

    def may_remove(self, entry, now_ms):
        return True


class GcdTrustPolicy(Policy):
    """003: create if the expiry is not in the past and (no entry exists or the new entry is
    sticky); update if not expired and (routing information unchanged or it comes from the
    GCD), a sticky entry staying sticky; delete if expired or not sticky."""

    name = "gcd-trust"
    seed = "003_6b6ea9fcba272a2c.txt: CREATE, UPDATE and DELETE rules"

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        if new.expiry_date_ms < now_ms:
            return Decision("refused", "expired", existing)
        if existing is None:
            return Decision("created", "new-participant", new)
        if new.is_sticky:
            return Decision("replaced", "sticky-provisioning", new)
        if existing.address == new.address:
            # UPDATE takes the offered expiry and visibility, but an update is not a
            # provisioning: a sticky entry ("provisioned by the user or by joynr during
            # start-up") stays sticky, or any same-address put would open it to DELETE.
            return Decision("merged", "same-address", replace(new, is_sticky=existing.is_sticky or new.is_sticky))
        if origin == Origin.GCD:
            return Decision("replaced", "from-gcd", new)
        return Decision("refused", "routing-info-changed", existing)

    def may_remove(self, entry, now_ms):
        return entry.expiry_date_ms < now_ms or not entry.is_sticky

    def may_purge(self, entry, now_ms):
        return entry.expiry_date_ms < now_ms


class LastWriterWinsPolicy(Policy):
    """No seed: every put replaces what is there, remove and purge take anything."""

    name = "last-writer-wins"
    seed = "none (naive baseline)"

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        if existing is None:
            return Decision("created", "new-participant", new)
        return Decision("replaced", "last-writer", new)

    def may_remove(self, entry, now_ms):
        return True

    def may_purge(self, entry, now_ms):
        return entry.expiry_date_ms < now_ms


POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (PrecedencePolicy, LocalRemotePolicy, GcdTrustPolicy, LastWriterWinsPolicy)
}
POLICY_NAMES: tuple[str, ...] = tuple(POLICIES)
DEFAULT_POLICY = PrecedencePolicy.name  # the newest seed's rules


def get_policy(policy: str | Policy) -> Policy:
    """The policy a rule set names: ``precedence``, or ``precedence+<variant>`` (``core.variants``)
    with a routing variant applied; a variant of another part leaves the policy as it is."""
    if isinstance(policy, Policy):
        return policy
    from .routing_variants import apply  # both import this module
    from .variants import parse_rule_set

    name, variant = parse_rule_set(policy)
    base = POLICIES[name]()
    return apply(base, variant.name) if variant is not None and variant.part == "routing" else base
