"""The local capabilities directory (LCD) of a cluster controller, without I/O.

It keeps the providers registered at this cluster controller (each with the GBIDs it is
registered for) and a cache of global discovery entries learned from the GCD, and decides
how a lookup is answered: ``plan_lookup`` says what is known locally and whether the GCD
must be asked (and in which GBIDs); the caller asks the GCD of the first selected GBID and
hands its answer to ``merge_global_result``. Turning results into routing entries is the
runtime's business.

DiscoveryScope, as joynr's LCD applies it:

- LOCAL_ONLY: the local registrations, whatever their scope and GBIDs; never the GCD.
- LOCAL_THEN_GLOBAL: the local registrations if there are any, else the fresh cache
  entries if there are any, else the GCD.
- LOCAL_AND_GLOBAL: the local registrations plus the global ones (fresh cache entries
  and globally registered local providers); the GCD is asked when there is no global one.
- GLOBAL_ONLY: only global ones: fresh cache entries and globally registered local
  providers; the GCD is asked when there is none.

Except for LOCAL_ONLY, a globally registered local provider is visible only in the GBIDs
it is registered for. A provider registered here always wins over a cache or GCD entry
for the same participantId and is returned with ``is_local=True``. A cache entry is fresh
when ``now - cached_at_ms <= cache_max_age_ms`` and its expiry date has not passed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .address import MqttAddress
from .discovery import (
    DEFAULT_EXPIRY_MS,
    DiscoveryEntry,
    DiscoveryEntryWithMetaInfo,
    DiscoveryErrorException,
    DiscoveryScope,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    check_str,
    check_str_list,
    validate_gbids,
)


@dataclass(frozen=True)
class LocalRegistration:
    """A provider registered at this cluster controller, and the GBIDs it is registered for."""

    entry: DiscoveryEntry
    gbids: tuple[str, ...]

    @property
    def participant_id(self) -> str:
        return self.entry.participant_id

    @property
    def scope(self) -> str:
        return self.entry.qos.scope

    @property
    def is_global(self) -> bool:
        return self.entry.qos.is_global


@dataclass(frozen=True)
class CachedGlobalEntry:
    entry: GlobalDiscoveryEntry
    gbid: str
    cached_at_ms: int


@dataclass(frozen=True)
class LookupResult:
    """``entries`` for the proxy; ``global_entries`` are the non-local providers among
    them with their addresses; ``offers`` is every entry the GCD returned, locally
    registered providers included: each becomes a routing-entry offer (seed 000: "routing
    entries are getting generated ... for the providers returned by the lookup request";
    the policy keeps a local entry)."""

    entries: tuple[DiscoveryEntryWithMetaInfo, ...]
    global_entries: tuple[GlobalDiscoveryEntry, ...]
    offers: tuple[GlobalDiscoveryEntry, ...] = ()


@dataclass(frozen=True)
class LookupPlan:
    """What a lookup found without the GCD, and whether (and where) the GCD must be asked.

    For a domain lookup ``participant_id`` is None; for a participant lookup ``domains``
    is empty and the GCD is asked with ``lookup_participant``.
    """

    scope: DiscoveryScope
    gbids: tuple[str, ...]  # the selected GBIDs, in the caller's order
    cache_max_age_ms: int
    domains: tuple[str, ...] = ()
    interface_name: str = ""
    participant_id: str | None = None
    local_entries: tuple[DiscoveryEntryWithMetaInfo, ...] = ()
    cached_entries: tuple[GlobalDiscoveryEntry, ...] = ()
    gcd_gbids: tuple[str, ...] = ()  # empty: answered without the GCD
    # every provider registered here that matches, whatever its scope and GBIDs: each
    # wins over what the GCD returns for its participantId
    all_local_entries: tuple[DiscoveryEntryWithMetaInfo, ...] = ()

    @property
    def needs_gcd_lookup(self) -> bool:
        return bool(self.gcd_gbids)

    @property
    def gcd_gbid(self) -> str | None:
        """The GBID whose GCD instance is asked: the first selected one."""
        return self.gcd_gbids[0] if self.gcd_gbids else None

    def result(self) -> LookupResult:
        """The answer of a lookup that needs no GCD."""
        if self.needs_gcd_lookup:
            raise ValueError("this lookup needs the GCD: use merge_global_result")
        return _combine(self.local_entries, self.cached_entries)


class LocalCapabilitiesDirectory:
    def __init__(
        self,
        cluster_controller_id: str,
        known_gbids: Sequence[str],
        clock: Callable[[], int],
        default_expiry_ms: int = DEFAULT_EXPIRY_MS,
    ) -> None:
        check_str(cluster_controller_id, "cluster_controller_id")
        known = check_str_list(known_gbids, "known_gbids")
        try:
            validate_gbids(list(known), known)
        except DiscoveryErrorException as exc:
            raise InvalidDiscoveryArgument("known_gbids", exc.detail) from None
        if not callable(clock):
            raise TypeError(f"clock: a callable returning epoch ms is required, got {clock!r}")
        self.cluster_controller_id = cluster_controller_id
        self.known_gbids = known
        self.clock = clock
        self.default_expiry_ms = default_expiry_ms
        self._local: dict[str, LocalRegistration] = {}
        self._cache: dict[tuple[str, str], CachedGlobalEntry] = {}

    @property
    def default_gbid(self) -> str:
        return self.known_gbids[0]

    def address(self, gbid: str) -> MqttAddress:
        """This cluster controller's global address in one backend."""
        return MqttAddress(gbid, self.cluster_controller_id)

    # -- local registrations ---------------------------------------------------------------

    def add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None = None) -> LocalRegistration:
        """Register (or re-register) a provider; no GBIDs means the default GBID."""
        if not isinstance(entry, DiscoveryEntry):
            raise InvalidDiscoveryArgument("entry", f"expected a DiscoveryEntry, got {entry!r}")
        no_gbids = gbids is None or (isinstance(gbids, (list, tuple)) and not gbids)
        selected = (
            (self.default_gbid,) if no_gbids else validate_gbids(gbids, self.known_gbids)
        )
        registration = LocalRegistration(entry, selected)
        self._local[entry.participant_id] = registration
        return registration

    def global_entry(self, participant_id: str) -> GlobalDiscoveryEntry:
        """The entry to send to the GCD's add for a registered provider (with its gbids)."""
        registration = self._local[participant_id]
        return registration.entry.to_global(self.address(registration.gbids[0]))

    def remove(self, participant_id: str) -> LocalRegistration | None:
        """Unregister; returns the registration (its gbids say where to remove it globally)."""
        check_str(participant_id, "participant_id")
        return self._local.pop(participant_id, None)

    def registration(self, participant_id: str) -> LocalRegistration | None:
        return self._local.get(participant_id)

    def registrations(self) -> list[LocalRegistration]:
        return [self._local[p] for p in sorted(self._local)]

    def global_registrations(self) -> list[LocalRegistration]:
        return [r for r in self.registrations() if r.is_global]

    def touch(self) -> list[str]:
        """Refresh every local registration; return the participant ids for the GCD's touch."""
        now = self.clock()
        for participant_id, registration in self._local.items():
            entry = replace(registration.entry, last_seen_date_ms=now,
                            expiry_date_ms=now + self.default_expiry_ms)
            self._local[participant_id] = replace(registration, entry=entry)
        return [r.participant_id for r in self.global_registrations()]

    # -- global cache ----------------------------------------------------------------------

    def cached(self, participant_id: str | None = None) -> list[CachedGlobalEntry]:
        return [c for k, c in sorted(self._cache.items())
                if participant_id is None or k[0] == participant_id]

    def remove_cached(self, participant_id: str) -> list[CachedGlobalEntry]:
        gone = self.cached(participant_id)
        for c in gone:
            del self._cache[(participant_id, c.gbid)]
        return gone

    def purge_expired(self) -> list[CachedGlobalEntry]:
        """Drop cache entries whose expiry date has passed."""
        now = self.clock()
        gone = [c for c in self.cached() if c.entry.expiry_date_ms < now]
        for c in gone:
            del self._cache[(c.entry.participant_id, c.gbid)]
        return gone

    # -- lookup ----------------------------------------------------------------------------

    def plan_lookup(
        self,
        domains: Sequence[str],
        interface_name: str,
        scope: DiscoveryScope = DiscoveryScope.LOCAL_THEN_GLOBAL,
        gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> LookupPlan:
        selected = self._selected(gbids)
        domains = check_str_list(domains, "domains")
        if not domains:
            raise InvalidDiscoveryArgument("domains", "expected at least one domain, got []")
        check_str(interface_name, "interface_name")
        scope, max_age = _check_scope(scope), _check_max_age(cache_max_age_ms)
        wanted = set(domains)

        def matches(e: Any) -> bool:
            return e.domain in wanted and e.interface_name == interface_name

        return self._plan(scope, selected, max_age, matches,
                          domains=tuple(domains), interface_name=interface_name)

    def plan_lookup_participant(
        self,
        participant_id: str,
        scope: DiscoveryScope = DiscoveryScope.LOCAL_THEN_GLOBAL,
        gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> LookupPlan:
        """Like plan_lookup for one participant; an empty result means not found."""
        selected = self._selected(gbids)
        check_str(participant_id, "participant_id")
        scope, max_age = _check_scope(scope), _check_max_age(cache_max_age_ms)
        return self._plan(scope, selected, max_age,
                          lambda e: e.participant_id == participant_id,
                          participant_id=participant_id)

    def merge_global_result(
        self, plan: LookupPlan, entries: Iterable[GlobalDiscoveryEntry]
    ) -> LookupResult:
        """Cache what the GCD returned for ``plan`` and combine it with the local answer."""
        now = self.clock()
        received = []
        for entry in entries:
            if not isinstance(entry, GlobalDiscoveryEntry):
                raise InvalidDiscoveryArgument(
                    "entries", f"expected GlobalDiscoveryEntry, got {entry!r}")
            address = entry.address
            gbid = address.broker_uri if isinstance(address, MqttAddress) else plan.gcd_gbid
            self._cache[(entry.participant_id, gbid or self.default_gbid)] = CachedGlobalEntry(
                entry, gbid or self.default_gbid, now)
            received.append(entry)
        if plan.scope is DiscoveryScope.LOCAL_ONLY:
            return _combine(plan.local_entries, ())
        # A participant registered here is answered from here, whatever the GCD said; the
        # GCD's entry for it is still offered to the routing table, whose policy decides.
        local_by_id = {e.participant_id: e for e in plan.all_local_entries}
        locals_ = {e.participant_id: e for e in plan.local_entries}
        remote: dict[str, GlobalDiscoveryEntry] = {}
        offers: dict[str, GlobalDiscoveryEntry] = {}
        for entry in received:
            pid = entry.participant_id
            offers.setdefault(pid, entry)
            if pid in local_by_id:
                locals_.setdefault(pid, local_by_id[pid])
            else:
                remote.setdefault(pid, entry)
        return _combine(tuple(locals_.values()), tuple(remote.values()), tuple(offers.values()))

    def _selected(self, gbids: Sequence[str] | None) -> tuple[str, ...]:
        # No GBIDs: every GBID this cluster controller knows.
        if gbids is None or (isinstance(gbids, (list, tuple)) and not gbids):
            return self.known_gbids
        return validate_gbids(gbids, self.known_gbids)

    def _plan(
        self,
        scope: DiscoveryScope,
        selected: tuple[str, ...],
        max_age: int,
        matches: Callable[[Any], bool],
        **what: Any,
    ) -> LookupPlan:
        now = self.clock()
        registered = [r for r in self.registrations() if matches(r.entry)]
        in_selected = [r for r in registered
                       if not r.is_global or any(g in selected for g in r.gbids)]
        global_locals = [r for r in in_selected if r.is_global]
        local_ids = frozenset(r.participant_id for r in registered)
        all_locals = tuple(r.entry.with_meta_info(True) for r in registered)
        cached = self._fresh_cache(matches, selected, max_age, now, exclude=local_ids)

        def plan(local: list[LocalRegistration], cache: list[GlobalDiscoveryEntry],
                 ask_gcd: bool) -> LookupPlan:
            return LookupPlan(
                scope=scope, gbids=selected, cache_max_age_ms=max_age,
                local_entries=tuple(r.entry.with_meta_info(True) for r in local),
                cached_entries=tuple(cache),
                gcd_gbids=selected if ask_gcd else (),
                all_local_entries=all_locals, **what,
            )

        if scope is DiscoveryScope.LOCAL_ONLY:
            return plan(registered, [], False)
        if scope is DiscoveryScope.LOCAL_THEN_GLOBAL:
            if in_selected:
                return plan(in_selected, [], False)
            return plan([], cached, not cached)
        if scope is DiscoveryScope.LOCAL_AND_GLOBAL:
            return plan(in_selected, cached, not (cached or global_locals))
        # GLOBAL_ONLY: a provider registered here globally counts as global.
        return plan(global_locals, cached, not (cached or global_locals))

    def _fresh_cache(
        self,
        matches: Callable[[Any], bool],
        selected: tuple[str, ...],
        max_age: int,
        now: int,
        exclude: frozenset[str],
    ) -> list[GlobalDiscoveryEntry]:
        best: dict[str, CachedGlobalEntry] = {}
        rank = {g: i for i, g in enumerate(selected)}
        for c in self._cache.values():
            pid = c.entry.participant_id
            if (pid in exclude or c.gbid not in rank or not matches(c.entry)
                    or now - c.cached_at_ms > max_age or c.entry.expiry_date_ms < now):
                continue
            # One entry per participant: the first selected GBID it is cached for.
            if pid not in best or rank[c.gbid] < rank[best[pid].gbid]:
                best[pid] = c
        return [best[p].entry for p in sorted(best)]


def _combine(
    local: Sequence[DiscoveryEntryWithMetaInfo], remote: Sequence[GlobalDiscoveryEntry],
    offers: Sequence[GlobalDiscoveryEntry] | None = None,
) -> LookupResult:
    """``offers`` defaults to the remote entries (a cache hit: what the GCD once returned
    for providers registered elsewhere)."""
    local_ids = {e.participant_id for e in local}
    remote = [e for e in remote if e.participant_id not in local_ids]
    entries = [*local, *(e.with_meta_info(False) for e in remote)]
    entries.sort(key=lambda e: e.participant_id)
    by_id = sorted(remote, key=lambda e: e.participant_id)
    offered = by_id if offers is None else sorted(offers, key=lambda e: e.participant_id)
    return LookupResult(tuple(entries), tuple(by_id), tuple(offered))


def _check_scope(scope: Any) -> DiscoveryScope:
    if isinstance(scope, DiscoveryScope):
        return scope
    try:
        return DiscoveryScope(scope)
    except ValueError:
        raise InvalidDiscoveryArgument(
            "scope", f"expected a DiscoveryScope, got {scope!r}") from None


def _check_max_age(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise InvalidDiscoveryArgument("cache_max_age_ms", f"expected an int >= 0, got {value!r}")
    return value
