"""The routing table: one routing entry per participantId, changed only through a policy.

Every decision (put, remove, purge) is handed to the listeners, so the trace sees exactly
what the table decided and why.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

from .address import (
    Address,
    AddressType,
    ChannelAddress,
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
    type_name,
)
from .policies import DEFAULT_POLICY, RUNTIME_KINDS, Origin, Policy, get_policy

__all__ = [
    "Origin", "PutResult", "RoutingDecision", "RoutingEntry", "RoutingTable", "policy_matrix",
    "wall_clock_ms",
]


@dataclass(frozen=True)
class RoutingEntry:
    address: Address
    is_globally_visible: bool
    expiry_date_ms: int
    is_sticky: bool = False


@dataclass(frozen=True)
class PutResult:
    outcome: str  # created | replaced | merged | refused
    reason: str
    entry: RoutingEntry | None  # what the table holds afterwards


@dataclass(frozen=True)
class RoutingDecision:
    """What the listeners receive: one per put, remove and purged entry."""

    op: str  # put | remove | purge
    participant_id: str
    policy: str
    outcome: str
    reason: str
    old: RoutingEntry | None
    new: RoutingEntry | None  # the entry offered to put
    entry: RoutingEntry | None  # what the table holds afterwards
    origin: Origin | str = ""  # empty for remove and purge


Listener = Callable[[RoutingDecision], None]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class RoutingTable:
    def __init__(
        self,
        runtime_kind: str,
        policy: str | Policy = DEFAULT_POLICY,
        own_addresses: Iterable[Address] = (),
        known_gbids: Iterable[str] = (),
        gcd_participant_id: str | None = None,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        if runtime_kind not in RUNTIME_KINDS:
            raise ValueError(
                f"runtime_kind: expected one of {', '.join(RUNTIME_KINDS)}, got {runtime_kind!r}"
            )
        self.runtime_kind = runtime_kind
        self.policy = get_policy(policy)
        self.own_addresses = tuple(own_addresses)
        self._own_topics = frozenset(
            a.topic for a in self.own_addresses if isinstance(a, MqttAddress)
        )
        self.known_gbids = tuple(known_gbids)
        self.gcd_participant_id = gcd_participant_id
        self.clock = clock
        self._entries: dict[str, RoutingEntry] = {}
        self._listeners: list[Listener] = []

    # -- listeners -------------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _emit(self, decision: RoutingDecision) -> None:
        for listener in self._listeners:
            listener(decision)

    # -- operations ------------------------------------------------------------------
    def put(
        self, participant_id: str, entry: RoutingEntry, origin: Origin | str = Origin.LOCAL
    ) -> PutResult:
        if not isinstance(participant_id, str) or not participant_id:
            raise ValueError(f"participant_id: expected a non-empty string, got {participant_id!r}")
        if not isinstance(entry, RoutingEntry):
            raise ValueError(f"entry: expected a RoutingEntry, got {entry!r}")
        # A misspelt origin would silently change what gcd-trust decides.
        try:
            origin = Origin(origin)
        except ValueError:
            raise ValueError(
                f"origin: unknown routing-entry origin {origin!r}; "
                f"expected one of {', '.join(Origin)}"
            ) from None
        type_name(entry.address)  # rejects anything that is not an address
        existing = self._entries.get(participant_id)
        decision = self.policy.judge_put(
            self.runtime_kind,
            existing,
            entry,
            origin=origin,
            own_topics=self._own_topics,
            now_ms=self.clock(),
        )
        if decision.outcome != "refused":
            self._entries[participant_id] = decision.entry
        self._emit(
            RoutingDecision(
                "put", participant_id, self.policy.name, decision.outcome, decision.reason,
                existing, entry, decision.entry, origin,
            )
        )
        return PutResult(decision.outcome, decision.reason, decision.entry)

    def lookup(self, participant_id: str, gbid: str | None = None) -> RoutingEntry | None:
        entry = self._entries.get(participant_id)
        if (
            entry is None
            or gbid is None
            or participant_id != self.gcd_participant_id
            or not isinstance(entry.address, MqttAddress)
        ):
            return entry
        # The GCD is reachable in every backend: the same topic on the broker of that GBID.
        if gbid not in self.known_gbids:
            return None
        return replace(entry, address=replace(entry.address, broker_uri=gbid))

    def remove(self, participant_id: str) -> str:
        existing = self._entries.get(participant_id)
        if existing is None:
            outcome = "absent"
        elif self.policy.may_remove(existing, self.clock()):
            del self._entries[participant_id]
            outcome = "removed"
        else:
            outcome = "refused-sticky"
        after = self._entries.get(participant_id)
        self._emit(
            RoutingDecision(
                "remove", participant_id, self.policy.name, outcome, outcome, existing, None, after
            )
        )
        return outcome

    def purge_expired(self, now_ms: int) -> list[str]:
        purged = [
            pid for pid, e in self._entries.items() if self.policy.may_purge(e, now_ms)
        ]
        for pid in purged:
            old = self._entries.pop(pid)
            self._emit(
                RoutingDecision("purge", pid, self.policy.name, "removed", "expired", old, None, None)
            )
        return purged

    # -- inspection ------------------------------------------------------------------
    def __contains__(self, participant_id: object) -> bool:
        return participant_id in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._entries))

    def items(self) -> list[tuple[str, RoutingEntry]]:
        return list(self._entries.items())


def _sample_addresses(variant: int) -> dict[AddressType, Address]:
    return {
        AddressType.IN_PROCESS: InProcessAddress(object()),
        AddressType.WEB_SOCKET: WebSocketAddress("WS", f"cc{variant}", 4242, "/"),
        AddressType.WEB_SOCKET_CLIENT: WebSocketClientAddress(f"client-{variant}"),
        AddressType.MQTT: MqttAddress("gbid1", f"topic-{variant}"),
        AddressType.CHANNEL: ChannelAddress(f"http://bounceproxy/{variant}", f"channel-{variant}"),
    }


def policy_matrix(policy: str | Policy, runtime_kind: str) -> dict[tuple[str, str], PutResult]:
    """What a policy does when a non-sticky entry of one type meets a new, different address
    of another, both with the same visibility: the matrix ``joynr-sim policies`` prints."""
    old, new = _sample_addresses(1), _sample_addresses(2)
    result = {}
    for old_type, old_address in old.items():
        for new_type, new_address in new.items():
            table = RoutingTable(runtime_kind, policy=policy, clock=lambda: 0)
            table.put("p", RoutingEntry(old_address, False, 1000))
            result[(old_type, new_type)] = table.put("p", RoutingEntry(new_address, False, 1000))
    return result
