"""When a provider publishes and when a consumer misses a publication: joynr's
``PublicationManager`` and ``SubscriptionManager`` as pure rules over a millisecond clock.

The quality-of-service kinds are joynr's:

    OnChange               publish on every change, but at most once per ``min_interval_ms``
                           (a change inside the interval is published when it ends, with the
                           latest value)
    OnChangeWithKeepAlive  the same, and at least once per ``max_interval_ms`` without a change
    Periodic               once per ``period_ms``, changed or not

Every subscription ends at ``expiry_date_ms``. An attribute subscription publishes the current
value when it starts (joynr sends the initial value); a broadcast subscription publishes only
what is fired. A consumer whose subscription asks ``alert_after_interval_ms`` is told of a
missed publication each time that long passes without one (Periodic, OnChangeWithKeepAlive).

Both managers are driven by the runtime: ``tick(now)`` returns what is due; ``next_due()``
says when to call it again, so a runtime sleeps exactly until then and a scenario's clock
advance is enough to make periodic publications happen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

NO_EXPIRY = 2**62
ATTRIBUTE = "attribute"
BROADCAST = "broadcast"


class SubscriptionError(ValueError):
    """A subscription quality of service or request that may not be used."""


@dataclass(frozen=True)
class SubscriptionQos:
    kind: str  # on-change | on-change-keep-alive | periodic
    expiry_date_ms: int = NO_EXPIRY
    min_interval_ms: int = 0
    max_interval_ms: int = 0
    period_ms: int = 0
    alert_after_interval_ms: int = 0
    publication_ttl_ms: int = 10_000

    KINDS = ("on-change", "on-change-keep-alive", "periodic")

    def check(self) -> SubscriptionQos:
        """joynr's bounds: intervals are positive where they matter and a keep-alive or an
        alert is never sooner than what it watches."""
        if self.kind not in self.KINDS:
            raise SubscriptionError(f"qos kind {self.kind!r}: expected one of {', '.join(self.KINDS)}")
        for name in ("expiry_date_ms", "min_interval_ms", "max_interval_ms", "period_ms",
                     "alert_after_interval_ms", "publication_ttl_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= NO_EXPIRY:
                raise SubscriptionError(f"qos {name}: a whole number of ms from 0 to {NO_EXPIRY}, got {value!r}")
        if self.kind == "periodic" and self.period_ms < 1:
            raise SubscriptionError("qos period_ms: a periodic subscription needs a period of at least 1 ms")
        if self.kind == "on-change-keep-alive" and self.max_interval_ms < max(1, self.min_interval_ms):
            raise SubscriptionError("qos max_interval_ms: at least min_interval_ms and at least 1 ms")
        if self.alert_after_interval_ms and self.alert_after_interval_ms < self.interval_ms:
            raise SubscriptionError(
                f"qos alert_after_interval_ms: at least the publication interval ({self.interval_ms} ms)"
            )
        if self.kind == "on-change" and self.alert_after_interval_ms:
            raise SubscriptionError("qos alert_after_interval_ms: an on-change subscription has no interval to miss")
        return self

    @property
    def interval_ms(self) -> int:
        """How often a publication comes at the least (0: only on change)."""
        return {"periodic": self.period_ms, "on-change-keep-alive": self.max_interval_ms}.get(self.kind, 0)


@dataclass(frozen=True)
class Publication:
    subscription_id: str
    subscriber: str  # the proxy's participant id
    name: str  # attribute or broadcast
    value: object
    ttl_ms: int


@dataclass
class _Published:
    subscriber: str
    name: str
    kind: str  # attribute | broadcast
    qos: SubscriptionQos
    last_sent_ms: int | None = None
    pending: tuple[object] | None = None  # a change held back by min_interval_ms


class PublicationManager:
    """The provider side: who subscribed to what, and which publications are due."""

    def __init__(self) -> None:
        self._subs: dict[str, _Published] = {}

    def add(self, subscription_id: str, subscriber: str, name: str, kind: str, qos: SubscriptionQos, now: int,
            current: object = None) -> list[Publication]:
        """A subscription request arrived. An attribute subscription publishes its current
        value at once; the same id again replaces the subscription (joynr's update)."""
        if kind not in (ATTRIBUTE, BROADCAST):
            raise SubscriptionError(f"subscription kind {kind!r}: expected {ATTRIBUTE} or {BROADCAST}")
        qos.check()
        if qos.expiry_date_ms <= now:
            raise SubscriptionError(f"subscription {subscription_id!r} expired before it started")
        sub = _Published(subscriber, name, kind, qos)
        self._subs[subscription_id] = sub
        if kind == ATTRIBUTE:
            return [self._send(subscription_id, sub, current, now)]
        return []

    def remove(self, subscription_id: str) -> bool:
        """A subscription stop arrived (False: there was no such subscription)."""
        return self._subs.pop(subscription_id, None) is not None

    def subscriptions(self) -> dict[str, tuple[str, str]]:
        return {sid: (s.subscriber, s.name) for sid, s in self._subs.items()}

    def changed(self, name: str, value: object, now: int) -> list[Publication]:
        """An attribute changed or a selective broadcast fired: publish at once where the
        minimum interval allows, hold the latest value where it does not."""
        out: list[Publication] = []
        for sid, sub in self._live(now):
            if sub.name != name or sub.qos.kind == "periodic" and sub.kind == ATTRIBUTE:
                continue
            if sub.last_sent_ms is None or now - sub.last_sent_ms >= sub.qos.min_interval_ms:
                out.append(self._send(sid, sub, value, now))
            else:
                sub.pending = (value,)
        return out

    def tick(self, now: int, values: dict[str, object]) -> list[Publication]:
        """Time passed: held changes whose interval ended, periodic and keep-alive
        publications (``values``: the current value of each attribute), and expiries."""
        out: list[Publication] = []
        for sid, sub in self._live(now):
            due = self._due(sub)
            if due is None or due > now:
                continue
            if sub.pending is not None:
                out.append(self._send(sid, sub, sub.pending[0], now))
            elif sub.kind == ATTRIBUTE and sub.name in values:
                out.append(self._send(sid, sub, values[sub.name], now))
        return out

    def next_due(self) -> int | None:
        dues = [d for s in self._subs.values() for d in (self._due(s), s.qos.expiry_date_ms) if d is not None]
        return min(dues, default=None)

    def _live(self, now: int) -> list[tuple[str, _Published]]:
        for sid in [sid for sid, s in self._subs.items() if s.qos.expiry_date_ms <= now]:
            del self._subs[sid]
        return list(self._subs.items())

    @staticmethod
    def _due(sub: _Published) -> int | None:
        if sub.last_sent_ms is None:
            return None
        if sub.pending is not None:
            return sub.last_sent_ms + sub.qos.min_interval_ms
        interval = sub.qos.interval_ms
        return sub.last_sent_ms + interval if interval and sub.kind == ATTRIBUTE else None

    @staticmethod
    def _send(sid: str, sub: _Published, value: object, now: int) -> Publication:
        sub.last_sent_ms = now
        sub.pending = None
        return Publication(sid, sub.subscriber, sub.name, value, sub.qos.publication_ttl_ms)


@dataclass
class _Subscribed:
    qos: SubscriptionQos
    last_ms: int
    received: int = 0
    missed: int = 0
    ended: bool = False


@dataclass(frozen=True)
class Missed:
    subscription_id: str
    since_ms: int  # the last publication (or the start)


@dataclass
class SubscriptionManager:
    """The consumer side: publications received, missed-publication alerts, expiry."""

    _subs: dict[str, _Subscribed] = field(default_factory=dict)

    def register(self, subscription_id: str, qos: SubscriptionQos, now: int) -> None:
        qos.check()
        self._subs[subscription_id] = _Subscribed(qos, now)

    def unregister(self, subscription_id: str) -> bool:
        return self._subs.pop(subscription_id, None) is not None

    def received(self, subscription_id: str, now: int) -> bool:
        """A publication arrived; False when no live subscription has that id (a late
        publication after a stop or an expiry: joynr drops it)."""
        sub = self._subs.get(subscription_id)
        if sub is None or sub.qos.expiry_date_ms <= now:
            return False
        sub.last_ms = now
        sub.received += 1
        return True

    def tick(self, now: int) -> tuple[list[Missed], list[str]]:
        """Missed-publication alerts due, and the subscriptions that expired."""
        missed: list[Missed] = []
        expired = [sid for sid, s in self._subs.items() if s.qos.expiry_date_ms <= now]
        for sid in expired:
            del self._subs[sid]
        for sid, sub in self._subs.items():
            alert = sub.qos.alert_after_interval_ms
            if alert and now - sub.last_ms >= alert:
                missed.append(Missed(sid, sub.last_ms))
                sub.missed += 1
                sub.last_ms = now  # the next alert comes one interval later, as joynr's timer
        return missed, expired

    def next_due(self) -> int | None:
        dues = []
        for s in self._subs.values():
            dues.append(s.qos.expiry_date_ms)
            if s.qos.alert_after_interval_ms:
                dues.append(s.last_ms + s.qos.alert_after_interval_ms)
        return min(dues, default=None)

    def counts(self, subscription_id: str) -> tuple[int, int] | None:
        """(publications received, alerts raised), or None when it ended."""
        sub = self._subs.get(subscription_id)
        return (sub.received, sub.missed) if sub else None
