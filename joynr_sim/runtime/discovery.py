"""Discovery in a cluster controller: the local capabilities directory at work.

``LocalDiscovery`` registers providers locally and, for scope GLOBAL, in the GCD of the
selected backends; answers lookups per DiscoveryScope from the local store, the global
cache or the GCD of the first selected GBID; turns every global result into a routing
entry through the routing table's policy (a local provider's entry always wins there);
touches the GCD at the freshness interval and removes the previous lifecycle's stale
entries after start-up. An "old joynr" cluster controller uses only the old GCD methods.

``DiscoveryProvider`` is the in-process provider libjoynr runtimes call for all of this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Protocol

from ..core.discovery import (
    DiscoveryEntry,
    DiscoveryEntryWithMetaInfo,
    DiscoveryError,
    DiscoveryErrorException,
    DiscoveryScope,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    InvalidDiscoveryEntry,
)
from ..core.errors import ApplicationException, JoynrRuntimeException
from ..core.lcd import LocalCapabilitiesDirectory, LookupPlan
from ..core.routing import RoutingEntry

DISCOVERY_INTERFACE = "joynr/system/Discovery"
GCD_CALL_TTL_MS = 10_000
DEFAULT_FRESHNESS_INTERVAL_MS = 3_600_000  # joynr's capabilities freshness update interval


def discovery_provider_participant_id(cc_id: str) -> str:
    return f"{cc_id}-discoveryprovider"


# What a discovery call can fail with: a transport or provider error, a modeled error,
# or bad input.
_FAILURES = (JoynrRuntimeException, DiscoveryErrorException, InvalidDiscoveryArgument, InvalidDiscoveryEntry)


def to_discovery_error(exc: ApplicationException) -> Exception:
    """A modeled error that came over the wire, back as the DiscoveryErrorException it was."""
    try:
        return DiscoveryErrorException(DiscoveryError(exc.error), str(exc))
    except ValueError:
        return exc


class GcdCall(Protocol):
    """Call a GCD method on the backend ``gbid`` and return its result."""

    def __call__(self, method: str, params: list[Any], gbid: str, ttl_ms: int) -> Awaitable[Any]: ...


class LocalDiscovery:
    """The local capabilities directory at work; what it needs of its cluster controller
    is its node's directory (``lcd``: the node owns it, so a crash loses it with the node)
    and four calls: ask the GCD, offer a routing entry, trace, and run in the background."""

    def __init__(
        self,
        cc_id: str,
        gbids: Sequence[str],
        clock: Callable[[], int],
        *,
        lcd: Callable[[], LocalCapabilitiesDirectory],
        gcd: GcdCall,
        routes: Callable[[str, RoutingEntry, str], Any],
        emit: Callable[..., Any],
        spawn: Callable[[Coroutine[Any, Any, Any]], Any],
        old_joynr: bool = False,
        freshness_interval_ms: int = DEFAULT_FRESHNESS_INTERVAL_MS,
        remove_stale_delay_ms: int = 0,
    ) -> None:
        self.cc_id = cc_id
        self.gbids = tuple(gbids)
        self.default_gbid = self.gbids[0]
        self.clock = clock
        self._lcd = lcd
        self._call_gcd = gcd
        self._put_route = routes
        self._emit = emit
        self._spawn = spawn
        self.old_joynr = old_joynr
        self.freshness_interval_ms = freshness_interval_ms
        self.remove_stale_delay_ms = remove_stale_delay_ms
        self.participant_id = discovery_provider_participant_id(cc_id)
        self._last_touch_ms = 0  # set by reset(), once the cluster controller has its clock

    @property
    def lcd(self) -> LocalCapabilitiesDirectory:
        return self._lcd()

    def reset(self) -> None:
        """A crash: the next touch is a freshness interval after now."""
        self._last_touch_ms = self.clock()

    def on_start(self) -> None:
        self.started_ms = self.clock()
        self._last_touch_ms = self.started_ms
        if not self.old_joynr:  # removeStale is a new method
            self._spawn(self._remove_stale_after_start())

    async def _remove_stale_after_start(self) -> None:
        await asyncio.sleep(self.remove_stale_delay_ms / 1000)
        for gbid in self.gbids:
            try:
                await self._gcd("remove_stale", [self.cc_id, self.started_ms], gbid)
            except _FAILURES as exc:
                self._trace("lcd.remove_stale", gbids=[gbid], error=_error_name(exc))
            else:
                self._trace("lcd.remove_stale", gbids=[gbid], error=None)

    def tick(self, now_ms: int) -> None:
        """Called on every purge: touch the GCD when the freshness interval has passed."""
        self.lcd.purge_expired()
        if now_ms - self._last_touch_ms >= self.freshness_interval_ms:
            self._last_touch_ms = now_ms
            self._spawn(self.touch())

    async def touch(self) -> None:
        participants = self.lcd.touch()
        for gbid in self.gbids:
            params = [self.cc_id] if self.old_joynr else [self.cc_id, participants]
            try:
                await self._gcd("touch", params, gbid)
                error = None
            except _FAILURES as exc:
                error = _error_name(exc)
            self._trace("lcd.touch", gbids=[gbid], result=participants, error=error)
            if self.old_joynr:
                break  # an old cluster controller knows one backend

    # -- registration ----------------------------------------------------------------
    async def add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> tuple[str, ...]:
        """Register locally and, for scope GLOBAL, in the GCD; returns the GBIDs used."""
        fields = dict(participant=entry.participant_id, domains=[entry.domain],
                      interface=entry.interface_name, scope=entry.qos.scope, gbids=list(gbids or []))
        previous = self.lcd.registration(entry.participant_id)
        try:
            registration = self.lcd.add(entry, gbids)
            if registration.is_global:
                global_entry = self.lcd.global_entry(entry.participant_id)
                if self.old_joynr:
                    await self._gcd("add_old", [[global_entry.to_wire()]], self.default_gbid)
                else:
                    await self._gcd("add", [global_entry.to_wire(), list(registration.gbids)],
                                    registration.gbids[0])
        except _FAILURES as exc:
            # A failed registration leaves the local store as it was.
            self.lcd.remove(entry.participant_id)
            if previous is not None:
                self.lcd.add(previous.entry, previous.gbids)
            self._trace("lcd.register", **fields, error=_error_name(exc))
            raise
        self._trace("lcd.register", **{**fields, "gbids": list(registration.gbids)}, error=None)
        return registration.gbids

    async def remove(self, participant_id: str) -> None:
        registration = self.lcd.remove(participant_id)
        error = None
        if registration is not None and registration.is_global:
            try:
                if self.old_joynr:
                    await self._gcd("remove_old", [[participant_id]], self.default_gbid)
                else:
                    await self._gcd("remove", [participant_id, list(registration.gbids)],
                                    registration.gbids[0])
            except _FAILURES as exc:
                error = _error_name(exc)
        self._trace("lcd.unregister", participant=participant_id,
                    gbids=list(registration.gbids) if registration else [], error=error)

    # -- lookup ----------------------------------------------------------------------
    async def lookup(
        self,
        domains: Sequence[str],
        interface_name: str,
        scope: DiscoveryScope | str = DiscoveryScope.LOCAL_THEN_GLOBAL,
        gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> list[DiscoveryEntryWithMetaInfo]:
        fields = dict(domains=list(domains), interface=interface_name, scope=_scope_name(scope),
                      gbids=list(gbids or []))
        try:
            plan = self.lcd.plan_lookup(domains, interface_name, scope, gbids, cache_max_age_ms)
            if plan.needs_gcd_lookup:
                if self.old_joynr:
                    found = await self._gcd("lookup_domains_old", [list(domains), interface_name],
                                            self.default_gbid)
                else:
                    found = await self._gcd("lookup_domains",
                                            [list(domains), interface_name, list(plan.gcd_gbids)],
                                            plan.gcd_gbid)
                result = self.lcd.merge_global_result(plan, [GlobalDiscoveryEntry.from_wire(e) for e in found])
            else:
                result = plan.result()
        except _FAILURES as exc:
            self._trace("lcd.lookup", **fields, error=_error_name(exc))
            raise
        self._add_routes(result.offers)
        self._trace("lcd.lookup", **fields, result=[e.participant_id for e in result.entries], error=None)
        return list(result.entries)

    async def lookup_participant(
        self,
        participant_id: str,
        scope: DiscoveryScope | str = DiscoveryScope.LOCAL_THEN_GLOBAL,
        gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> DiscoveryEntryWithMetaInfo:
        fields = dict(participant=participant_id, scope=_scope_name(scope), gbids=list(gbids or []))
        try:
            plan: LookupPlan = self.lcd.plan_lookup_participant(participant_id, scope, gbids, cache_max_age_ms)
            if plan.needs_gcd_lookup:
                if self.old_joynr:
                    found = await self._gcd("lookup_participant_old", [participant_id], self.default_gbid)
                else:
                    found = await self._gcd("lookup_participant", [participant_id, list(plan.gcd_gbids)],
                                            plan.gcd_gbid)
                result = self.lcd.merge_global_result(plan, [GlobalDiscoveryEntry.from_wire(found)])
            else:
                result = plan.result()
            if not result.entries:
                raise DiscoveryErrorException(DiscoveryError.NO_ENTRY_FOR_PARTICIPANT, participant_id)
        except _FAILURES as exc:
            self._trace("lcd.lookup", **fields, error=_error_name(exc))
            raise
        self._add_routes(result.offers)
        self._trace("lcd.lookup", **fields, result=[participant_id], error=None)
        return result.entries[0]

    def _add_routes(self, entries: Sequence[GlobalDiscoveryEntry]) -> None:
        """Every provider the GCD returned becomes a routing-entry offer, a locally
        registered one too; the policy decides what stays (a local entry is kept)."""
        for entry in entries:
            self._put_route(entry.participant_id, RoutingEntry(entry.address, True, entry.expiry_date_ms), "gcd")

    # -- the GCD ---------------------------------------------------------------------
    async def _gcd(self, method: str, params: list[Any], gbid: str) -> Any:
        try:
            return await self._call_gcd(method, params, gbid, GCD_CALL_TTL_MS)
        except ApplicationException as exc:
            raise to_discovery_error(exc) from None

    def _trace(self, ev: str, **fields: Any) -> None:
        self._emit(ev, **fields)


def _scope_name(scope: DiscoveryScope | str) -> str:
    return scope.value if isinstance(scope, DiscoveryScope) else str(scope)


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, DiscoveryErrorException):
        return exc.error.value
    return type(exc).__name__


class DiscoveryProvider:
    """joynr's discovery provider in the cluster controller, for its libjoynr runtimes."""

    interface_name = DISCOVERY_INTERFACE

    def __init__(self, discovery: LocalDiscovery) -> None:
        self._discovery = discovery

    async def add(self, discoveryEntry: dict, gbids: list | None = None) -> list:
        try:
            entry = DiscoveryEntry.from_wire(discoveryEntry)
            return list(await self._discovery.add(entry, gbids or None))
        except DiscoveryErrorException as exc:
            raise ApplicationException(exc.error.value, str(exc)) from None

    async def remove(self, participantId: str) -> None:
        await self._discovery.remove(participantId)

    async def lookup(self, domains: list, interfaceName: str, scope: str, gbids: list | None,
                     cacheMaxAge: int) -> list:
        try:
            found = await self._discovery.lookup(domains, interfaceName, scope, gbids or None, cacheMaxAge)
        except DiscoveryErrorException as exc:
            raise ApplicationException(exc.error.value, str(exc)) from None
        return [e.to_wire() for e in found]

    async def lookupParticipant(self, participantId: str, scope: str, gbids: list | None,
                                cacheMaxAge: int) -> dict:
        try:
            found = await self._discovery.lookup_participant(participantId, scope, gbids or None, cacheMaxAge)
        except DiscoveryErrorException as exc:
            raise ApplicationException(exc.error.value, str(exc)) from None
        return found.to_wire()
