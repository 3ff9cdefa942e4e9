"""A runtime's subscriptions: the consumer side (a proxy subscribes, publications arrive,
the subscription ends) and the provider side (requests arrive, changes and broadcasts are
published), carried out over the message router. The rules of when to publish and when a
subscription ends are ``joynr_sim.core.subscriptions``; the payloads are
``joynr_sim.core.subscription_wire``; multicast receivers are the router's
(``joynr_sim.core.multicast``).

An attribute subscription and a selective broadcast subscription are joynr messages from the
proxy to the provider and back (request, reply, publications, stop). A non-selective
broadcast is a multicast: the proxy registers itself as a receiver of the multicast id in
its router (and, from a libjoynr runtime, in its cluster controller's, which subscribes the
multicast's topic on the provider's backend), then tells the provider with a multicast
subscription request; what the provider fires is one message to the multicast id.

Everything here is in-memory: a crash of the runtime loses it, as in joynr.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..core.actions import Drop
from ..core.errors import SubscriptionException
from ..core.ids import uuid_from
from ..core.message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    MULTICAST,
    MULTICAST_SUBSCRIPTION_REQUEST,
    PUBLICATION,
    SUBSCRIPTION_REPLY,
    SUBSCRIPTION_REQUEST,
    SUBSCRIPTION_STOP,
    JoynrMessage,
)
from ..core.multicast import MulticastError, MulticastId, multicast_id, parse
from ..core.subscription_wire import (
    SubscriptionPayloadError,
    SubscriptionRequest,
    decode_multicast,
    decode_publication,
    decode_reply,
    decode_request,
    decode_stop,
    encode_multicast,
    encode_publication,
    encode_reply,
    encode_request,
    encode_stop,
)
from ..core.subscriptions import ATTRIBUTE, BROADCAST, PublicationManager, SubscriptionQos
from .participants import (
    JoynrTimeoutException,
    Notifier,
    ProviderSkeleton,
    ProxySkeleton,
    filter_error,
    offers,
    passes,
)
from .subscriber import Subscription

if TYPE_CHECKING:
    from .base import Runtime

SUBSCRIBE_TTL_MS = 30_000
MULTICAST_TTL_MS = 10_000
SUB_KINDS = ("attribute", "broadcast", "multicast")
MAX_TIMER_S = 3600.0


class _ProviderNotifier(Notifier):
    def __init__(self, hub: Subscriptions, provider: str) -> None:
        self._hub, self._provider = hub, provider

    def value_changed(self, attribute: str, value: Any) -> None:
        self._hub.changed(self._provider, attribute, value)

    def fire_broadcast(self, broadcast: str, value: Any, partitions: tuple[str, ...] = ()) -> None:
        self._hub.fire(self._provider, broadcast, value, partitions)

    def fire_selective_broadcast(self, broadcast: str, value: Any) -> None:
        self._hub.changed(self._provider, broadcast, value)


class Subscriptions:
    """Both sides of a runtime's subscriptions."""

    def __init__(self, runtime: Runtime,
                 add_receiver: Callable[[MulticastId, str], Awaitable[None]],
                 remove_receiver: Callable[[MulticastId, str], Awaitable[None]]) -> None:
        self.runtime = runtime
        self._add_receiver, self._remove_receiver = add_receiver, remove_receiver
        # consumer side; the managers' state is the node's, which a crash loses with it
        self.manager = runtime.node.subscription_manager
        self.subscriptions: dict[str, Subscription] = {}
        self._replies: dict[str, asyncio.Future] = {}
        # provider side: per provider, its publication manager and selective filters
        self.publishers: dict[str, PublicationManager] = runtime.node.publication_managers
        self._filters: dict[str, dict[str, Any]] = {}
        self._implementations: dict[str, Any] = {}
        self._timer: asyncio.TimerHandle | None = None

    def now(self) -> int:
        return self.runtime.clock.now_ms()

    def emit(self, ev: str, **fields: Any) -> None:
        self.runtime.emit(ev, **fields)

    # -- provider side -------------------------------------------------------------------
    def attach(self, skeleton: ProviderSkeleton) -> None:
        """A provider registered here: its changes and broadcasts go through this runtime."""
        self.publishers[skeleton.participant_id] = PublicationManager()
        self._implementations[skeleton.participant_id] = skeleton.implementation
        if hasattr(skeleton.implementation, "notifier"):
            skeleton.implementation.notifier = _ProviderNotifier(self, skeleton.participant_id)

    def detach(self, participant_id: str, implementation: Any) -> None:
        self.publishers.pop(participant_id, None)
        self._implementations.pop(participant_id, None)
        if hasattr(implementation, "notifier"):
            implementation.notifier = Notifier()

    def _on_request(self, msg: JoynrMessage, skeleton: ProviderSkeleton) -> None:
        try:
            req = decode_request(msg.payload, msg.type, self.runtime.node.router.limits)
        except SubscriptionPayloadError as exc:
            self.runtime.carry_out([Drop(msg, "invalid-message", detail=str(exc), field=exc.field)])
            return
        kind = {SUBSCRIPTION_REQUEST: "attribute", BROADCAST_SUBSCRIPTION_REQUEST: "broadcast",
                MULTICAST_SUBSCRIPTION_REQUEST: "multicast"}[msg.type]
        publisher = self.publishers.get(skeleton.participant_id)
        error = None
        if publisher is None:
            error = f"provider {skeleton.participant_id} takes no subscriptions"
        elif not offers(skeleton.implementation, req.name, kind):
            error = f"{skeleton.interface_name} has no {kind} {req.name!r}"
        elif kind == "broadcast":
            error = filter_error(skeleton.implementation, req.name, req.filter)
        outcome = "refused" if error else "added"
        holder = None
        if error is None and kind != "multicast":
            assert publisher is not None
            holder = publisher.subscriptions().get(req.subscription_id)
            if holder is not None:
                outcome = "replaced"  # joynr's update: the same subscriber, the same id
        if error is None and kind != "multicast" and holder is not None and holder[0] != msg.sender:
            # Another participant's id: taking it over would steal that subscriber's publications.
            error, outcome = f"subscription id {req.subscription_id!r} belongs to another subscriber", "refused"
        if error is None and kind != "multicast":
            assert publisher is not None
            current = getattr(skeleton.implementation, req.name, None) if kind == "attribute" else None
            try:
                due = publisher.add(req.subscription_id, msg.sender, req.name,
                                    ATTRIBUTE if kind == "attribute" else BROADCAST, req.qos, self.now(), current)
            except ValueError as exc:
                error, outcome, due = str(exc), "refused", []
            if kind == "broadcast" and error is None:
                self._filters[req.subscription_id] = req.filter or {}
        else:
            due = []
        self.emit("sub.add", sid=req.subscription_id, subscriber=msg.sender, provider=skeleton.participant_id,
                  name=req.name, sub_kind=kind, outcome=outcome, **({"detail": error} if error else {}))
        self.runtime.route(self._message(SUBSCRIPTION_REPLY, skeleton.participant_id, msg.sender,
                                         msg.expiry_date_ms, encode_reply(req.subscription_id, error)))
        self._publish(skeleton.participant_id, due)
        self.arm()

    def _on_stop(self, msg: JoynrMessage, skeleton: ProviderSkeleton) -> None:
        try:
            sid = decode_stop(msg.payload, self.runtime.node.router.limits)
        except SubscriptionPayloadError as exc:
            self.runtime.carry_out([Drop(msg, "invalid-message", detail=str(exc), field=exc.field)])
            return
        publisher = self.publishers.get(skeleton.participant_id)
        known = publisher is not None and sid in publisher.subscriptions() \
            and publisher.subscriptions()[sid][0] == msg.sender  # only its subscriber may stop it
        if known:
            assert publisher is not None
            publisher.remove(sid)
            self._filters.pop(sid, None)
        self.emit("sub.stop", sid=sid, side="provider", reason="stop-received" if known else "unknown")

    def changed(self, provider: str, name: str, value: Any) -> None:
        """An attribute changed or a selective broadcast fired in a provider here."""
        publisher = self.publishers.get(provider)
        if publisher is None:
            return
        due = publisher.changed(name, value, self.now())
        implementation = self._implementations.get(provider)
        self._publish(provider, [p for p in due
                                 if passes(implementation, name, self._filters.get(p.subscription_id), value)])
        self.arm()  # a change held back by min_interval_ms goes when the interval ends

    def fire(self, provider: str, broadcast: str, value: Any, partitions: tuple[str, ...] = ()) -> None:
        """A non-selective broadcast: one multicast message, routed by the router's rules."""
        mid = multicast_id(provider, broadcast, partitions, limits=self.runtime.node.router.limits)
        msg = self._message(MULTICAST, provider, str(mid), self.now() + MULTICAST_TTL_MS, encode_multicast(value))
        entry = self.runtime.table.lookup(provider)
        self.emit("mc.fire", multicast=str(mid), provider=provider, msg=msg.id,
                  visible=bool(entry is not None and entry.is_globally_visible))
        self.runtime.route(msg)

    def _publish(self, provider: str, due: list) -> None:
        for pub in due:
            msg = self._message(PUBLICATION, provider, pub.subscriber, self.now() + pub.ttl_ms,
                                encode_publication(pub.subscription_id, pub.value))
            self.emit("sub.publish", sid=pub.subscription_id, subscriber=pub.subscriber, provider=provider,
                      name=pub.name, msg=msg.id)
            self.runtime.route(msg)

    # -- consumer side -------------------------------------------------------------------
    async def subscribe(self, proxy: str, provider: str, name: str, kind: str, qos: SubscriptionQos, *,
                        partitions: tuple[str, ...] = (), filter: dict[str, Any] | None = None,
                        ttl_ms: int = SUBSCRIBE_TTL_MS) -> Subscription:
        if kind not in SUB_KINDS:
            raise ValueError(f"kind: expected one of {', '.join(SUB_KINDS)}, got {kind!r}")
        qos.check()
        sid = uuid_from(self.runtime.ids)  # reproducible from the run's seed, as participant ids are
        mid = None
        if kind == "multicast":
            mid = multicast_id(provider, name, partitions, wildcards=True, limits=self.runtime.node.router.limits)
            await self._add_receiver(mid, proxy)
        sub = Subscription(sid, proxy, provider, name, kind, qos, mid, filter)
        self.subscriptions[sid] = sub
        self.manager.register(sid, qos, self.now())
        self.arm()
        future = asyncio.get_running_loop().create_future()
        self._replies[sid] = future
        self._send_request(sub, ttl_ms)
        try:
            error = await asyncio.wait_for(future, ttl_ms / 1000)
        except TimeoutError:
            error = f"no subscription reply within {ttl_ms} ms"
            await self._end(sub, "no-reply")
            raise JoynrTimeoutException(f"subscribe {name} of {provider}: {error}") from None
        finally:
            self._replies.pop(sid, None)
        if error is not None:
            await self._end(sub, "refused")
            raise SubscriptionException(f"subscribe {name} of {provider}: {error}")
        return sub

    def _send_request(self, sub: Subscription, ttl_ms: int = SUBSCRIBE_TTL_MS, renew: str | None = None) -> None:
        """The subscription request; sent again with the same id it renews the subscription
        (joynr's update), which teaches a restarted provider or cluster controller again."""
        req = SubscriptionRequest(sub.subscription_id, sub.name, sub.qos,
                                  sub.filter if sub.kind == "broadcast" else None,
                                  sub.multicast.partitions if sub.multicast is not None else ())
        mtype = {"attribute": SUBSCRIPTION_REQUEST, "broadcast": BROADCAST_SUBSCRIPTION_REQUEST,
                 "multicast": MULTICAST_SUBSCRIPTION_REQUEST}[sub.kind]
        msg = self._message(mtype, sub.proxy, sub.provider, self.now() + ttl_ms, encode_request(req, mtype))
        self.emit("sub.request", sid=sub.subscription_id, proxy=sub.proxy, provider=sub.provider, name=sub.name,
                  sub_kind=sub.kind, multicast=str(sub.multicast) if sub.multicast else None, msg=msg.id, renew=renew)
        self.runtime.route(msg)

    def renew(self, reason: str) -> None:
        """Send every live subscription's request again (``reason``: why)."""
        for sub in list(self.subscriptions.values()):
            self._send_request(sub, renew=reason)

    async def unsubscribe(self, subscription_id: str) -> None:
        sub = self.subscriptions.get(subscription_id)
        if sub is None:
            raise KeyError(f"subscription_id: no live subscription {subscription_id!r} in {self.runtime.runtime_id}")
        if sub.kind != "multicast":  # a multicast provider keeps no state to stop
            self.runtime.route(self._message(SUBSCRIPTION_STOP, sub.proxy, sub.provider,
                                             self.now() + SUBSCRIBE_TTL_MS, encode_stop(subscription_id)))
        await self._end(sub, "unsubscribed")

    async def _end(self, sub: Subscription, reason: str) -> None:
        self.subscriptions.pop(sub.subscription_id, None)
        self.manager.unregister(sub.subscription_id)
        sub._end(reason)
        self.emit("sub.stop", sid=sub.subscription_id, side="consumer", reason=reason)
        if sub.multicast is not None:
            await self._remove_receiver(sub.multicast, sub.proxy)

    def _on_reply(self, msg: JoynrMessage) -> None:
        try:
            sid, error = decode_reply(msg.payload, self.runtime.node.router.limits)
        except SubscriptionPayloadError as exc:
            self.runtime.carry_out([Drop(msg, "invalid-message", detail=str(exc), field=exc.field)])
            return
        future = self._replies.get(sid)
        sub = self.subscriptions.get(sid)
        if future is not None:
            outcome = "refused" if error else "ok"
        elif sub is not None and msg.sender == sub.provider:
            outcome = "refused" if error else "renewed"
        else:
            outcome = "unknown"
        self.emit("sub.reply", sid=sid, outcome=outcome, **({"detail": error} if error else {}))
        if future is not None and not future.done():
            future.set_result(error)
        elif outcome == "refused" and sub is not None:
            self.runtime.spawn(self._end(sub, "refused"))

    def _on_publication(self, msg: JoynrMessage, proxy: ProxySkeleton) -> None:
        try:
            sid, value = decode_publication(msg.payload, self.runtime.node.router.limits)
        except SubscriptionPayloadError as exc:
            self.runtime.carry_out([Drop(msg, "invalid-message", detail=str(exc), field=exc.field)])
            return
        sub = self.subscriptions.get(sid)
        ok = sub is not None and sub.proxy == proxy.participant_id and msg.sender == sub.provider \
            and self.manager.received(sid, self.now())
        self.emit("sub.publication", sid=sid, msg=msg.id, outcome="delivered" if ok else "late")
        if ok:
            assert sub is not None
            sub._add(value)

    def _on_multicast(self, msg: JoynrMessage, proxy: ProxySkeleton) -> None:
        try:
            fired = parse(msg.recipient, limits=self.runtime.node.router.limits)
            value = decode_multicast(msg.payload)
        except (MulticastError, SubscriptionPayloadError) as exc:
            self.runtime.carry_out([Drop(msg, "invalid-message", detail=str(exc))])
            return
        for sub in list(self.subscriptions.values()):
            if sub.proxy == proxy.participant_id and sub.multicast is not None and sub.multicast.matches(fired) \
                    and self.manager.received(sub.subscription_id, self.now()):
                self.emit("sub.publication", sid=sub.subscription_id, msg=msg.id, outcome="delivered")
                sub._add(value)

    # -- both ----------------------------------------------------------------------------
    def dispatch(self, msg: JoynrMessage, skeleton: Any) -> bool:
        """A subscription message delivered to a local provider or proxy; False when it is
        none of them."""
        if isinstance(skeleton, ProviderSkeleton):
            if msg.type in (SUBSCRIPTION_REQUEST, BROADCAST_SUBSCRIPTION_REQUEST, MULTICAST_SUBSCRIPTION_REQUEST):
                self._on_request(msg, skeleton)
                return True
            if msg.type == SUBSCRIPTION_STOP:
                self._on_stop(msg, skeleton)
                return True
        elif isinstance(skeleton, ProxySkeleton):
            handler = {SUBSCRIPTION_REPLY: lambda m, s: self._on_reply(m), PUBLICATION: self._on_publication,
                       MULTICAST: self._on_multicast}.get(msg.type)
            if handler is not None:
                handler(msg, skeleton)
                return True
        return False

    def arm(self) -> None:
        """Wake up when the next publication, alert or expiry is due (the managers say
        when), not only at the runtime's purge interval: a keep-alive of 200 ms is kept."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        dues = [p.next_due() for p in self.publishers.values()] + [self.manager.next_due()]
        due = min((d for d in dues if d is not None), default=None)
        if due is None or not self.runtime.running:
            return
        delay_s = max(0, due - self.now()) / 1000
        if delay_s <= MAX_TIMER_S:  # farther: the purge interval and a clock advance come first
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._wake)

    def _wake(self) -> None:
        self._timer = None
        if self.runtime.running and self.runtime.dispatcher.subscriptions is self:  # not a crashed incarnation's
            self.tick(self.now(), self.runtime.dispatcher.attribute_values)

    def tick(self, now: int, values: Callable[[str], dict[str, Any]]) -> None:
        """Time passed: due publications go, expired subscriptions end."""
        for provider, publisher in self.publishers.items():
            self._publish(provider, publisher.tick(now, values(provider)))
        missed, expired = self.manager.tick(now)
        for alert in missed:
            sub = self.subscriptions.get(alert.subscription_id)
            if sub is not None:  # joynr tells the listener; this consumer also asks again
                self._send_request(sub, renew="missed-publication")
        for sid in expired:
            sub = self.subscriptions.get(sid)
            if sub is not None:
                self.runtime.spawn(self._end(sub, "expired"))
        self.arm()

    def multicast_receivers(self) -> list[tuple[MulticastId, str]]:
        return [(s.multicast, s.proxy) for s in self.subscriptions.values() if s.multicast is not None]

    def _message(self, type_: str, sender: str, recipient: str, expiry: int, payload: bytes) -> JoynrMessage:
        return JoynrMessage(type=type_, sender=sender, recipient=recipient, expiry_date_ms=expiry, payload=payload)
