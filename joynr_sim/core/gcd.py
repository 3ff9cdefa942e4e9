"""The global capabilities directory (GCD) across several backends (GBIDs).

One instance serves one backend (its own GBID) and shares its store with the instances
of every other backend, so all of them know all providers. The store holds one row per
(participantId, GBID); a row's MqttAddress is always ``MqttAddress(<its GBID>, <topic>)``
whatever the caller sent, and the topic is the cluster controller id of the provider. A
ChannelAddress (joynr's HTTP transport, which old cluster controllers may still use) names
no backend and is stored as sent; its channel id is the cluster controller id.

Methods with a ``gbids`` parameter are the new interface (GlobalCapabilitiesDirectory.fidl
0.3): they raise ``DiscoveryErrorException`` carrying a modeled ``DiscoveryError``. The
``*_old`` methods serve old cluster controllers: they act on the own GBID only and never
raise a modeled error; where joynr answers with a generic failure (old participant lookup
that finds nothing) they raise ``ProviderRuntimeException``.

Checks run before anything is read or written: first the GBID list (left to right), then
the other arguments. A malformed discovery entry, including one whose address is neither
an MqttAddress nor a ChannelAddress (joynr's GCD refuses the other types: they are not
global), raises ``InvalidDiscoveryEntry`` (a ValueError naming the field): no modeled
GcdError fits, so the GCD service answers it as a ProviderRuntimeException with that
message. Other malformed arguments raise ``InvalidDiscoveryArgument``.

Every call runs in one transaction of its store (any ``GcdStore``, see
``joynr_sim.core.gcd_store``; the GCD service gives it SQLite or PostgreSQL): a rejected
call changes nothing. A row whose expiry date lies before ``clock()`` is treated as absent
by every call (it is never returned, removed, touched or counted as registered) until
``purge_expired`` deletes it. With a last-seen timeout, a row last seen longer ago is
outdated: lookups treat it as absent (seed 001: such entries "are not returned as result
of a lookup request") until ``purge_not_seen_since`` deletes it.

Lookups return one entry per participantId, the "best" of the selected GBIDs: the own
GBID when the provider is registered there, else the first selected GBID (in the
caller's order) where it is.

``variant`` names one of ``core.gcd_variants``: the GCD then breaks that one rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from . import gcd_variants as v
from .discovery import (
    DEFAULT_EXPIRY_MS,
    DiscoveryError,
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    ProviderRuntimeException,
    check_str,
    check_str_list,
    validate_gbids,
)
from .gcd_rules import alive, check_entry, check_int, own_first, picks, row_in, seen_since, select_gbids
from .gcd_store import GcdRow, GcdStore, GcdTransaction, RowKey

DEFAULT_GBID = "joynrdefaultgbid"

# joynr's well-known ids of the GCD: its provider's participant id, and the channel (the
# MQTT client id and topic) every instance serves on, one per backend.
GCD_PARTICIPANT_ID = "capabilitiesdirectory_participantid"
GCD_TOPIC = "discoverydirectory_channelid"
GCD_INTERFACE = "infrastructure/GlobalCapabilitiesDirectory"
# Where a run's GCD is: its own instances, one per backend (the default), or a discovery
# service already serving the external brokers' GCD topic (a joynr JDS, another run's GCD).
OWN_GCD, EXTERNAL_GCD = "own", "external"
GCD_PLACES = (OWN_GCD, EXTERNAL_GCD)


@dataclass(frozen=True)
class AddResult:
    """What an add did for one participant: which GBIDs got a new row, which were replaced."""

    participant_id: str
    gbids_created: tuple[str, ...]
    gbids_replaced: tuple[str, ...]


class GlobalCapabilitiesDirectory:
    def __init__(
        self,
        store: GcdStore,
        own_gbid: str = DEFAULT_GBID,
        known_gbids: Sequence[str] | None = None,
        clock: Callable[[], int] | None = None,
        default_expiry_ms: int = DEFAULT_EXPIRY_MS,
        last_seen_timeout_ms: int | None = None,
        variant: str | None = None,
    ) -> None:
        if not callable(getattr(store, "transaction", None)):
            raise TypeError(f"store: a GcdStore is required, got {store!r}")
        if clock is None or not callable(clock):
            raise TypeError(f"clock: a callable returning epoch ms is required, got {clock!r}")
        check_str(own_gbid, "own_gbid")
        known = (own_gbid,) if known_gbids is None else tuple(known_gbids)
        try:
            validate_gbids(list(known), known)
        except DiscoveryErrorException as exc:
            raise InvalidDiscoveryArgument("known_gbids", exc.detail) from None
        if own_gbid not in known:
            raise InvalidDiscoveryArgument("own_gbid", f"{own_gbid!r} is not in {list(known)!r}")
        if not isinstance(default_expiry_ms, int) or default_expiry_ms <= 0:
            raise InvalidDiscoveryArgument(
                "default_expiry_ms", f"expected a positive int, got {default_expiry_ms!r}"
            )
        if last_seen_timeout_ms is not None and check_int(last_seen_timeout_ms, "last_seen_timeout_ms") <= 0:
            raise InvalidDiscoveryArgument(
                "last_seen_timeout_ms", f"expected a positive int, got {last_seen_timeout_ms}")
        if variant is not None and variant not in v.GCD_VARIANT_NAMES:
            raise InvalidDiscoveryArgument("variant", f"no GCD variant {variant!r}; known: {v.GCD_VARIANT_NAMES}")
        self.store = store
        self.own_gbid = own_gbid
        self.known_gbids = known
        self.clock = clock
        self.default_expiry_ms = default_expiry_ms
        self.last_seen_timeout_ms = last_seen_timeout_ms
        self.variant = variant

    def _selected(self, gbids: Any) -> tuple[str, ...]:
        return select_gbids(gbids, self.known_gbids, self.own_gbid, checked=self.variant != v.NO_GBID_ERRORS)

    def _everywhere(self) -> tuple[str, ...]:
        return own_first(self.own_gbid, self.known_gbids)

    # -- add -------------------------------------------------------------------------------

    def add(
        self, entry: GlobalDiscoveryEntry | Mapping[str, Any], gbids: Sequence[str]
    ) -> AddResult:
        """Register ``entry`` in each listed GBID; rows in unlisted GBIDs are kept."""
        selected = self._selected(gbids)
        checked = check_entry(entry)
        if self.variant == v.IGNORES_GBIDS:
            selected = self._everywhere()
        with self.store.transaction(write=True) as tx:
            return self._put(tx, checked, selected)

    def add_old(
        self, entries: GlobalDiscoveryEntry | Mapping[str, Any] | Sequence[Any]
    ) -> list[AddResult]:
        """Old add (one entry or a list): every entry is registered in the own GBID."""
        if isinstance(entries, (GlobalDiscoveryEntry, Mapping)):
            entries = [entries]
        if not isinstance(entries, (list, tuple)):
            raise InvalidDiscoveryArgument(
                "entries", f"expected a list of entries, got {entries!r}")
        checked = [check_entry(e) for e in entries]
        gbids = self._everywhere() if self.variant == v.IGNORES_GBIDS else (self.own_gbid,)
        with self.store.transaction(write=True) as tx:
            return [self._put(tx, e, gbids) for e in checked]

    def _put(
        self, tx: GcdTransaction, entry: GlobalDiscoveryEntry, gbids: tuple[str, ...]
    ) -> AddResult:
        now = self.clock()
        existing = {r.gbid for r in tx.rows_for_participant(entry.participant_id) if alive(r, now)}
        for gbid in gbids:
            tx.put(row_in(entry, gbid))
        return AddResult(
            entry.participant_id,
            tuple(g for g in gbids if g not in existing),
            tuple(g for g in gbids if g in existing),
        )

    # -- lookup ----------------------------------------------------------------------------

    def lookup_domains(
        self, domains: Sequence[str], interface_name: str, gbids: Sequence[str]
    ) -> list[GlobalDiscoveryEntry]:
        """One entry per provider of (domain, interface) in the selected GBIDs.

        Nothing in the selected GBIDs but something in others: NO_ENTRY_FOR_SELECTED_BACKENDS;
        nothing anywhere: an empty list.
        """
        selected = self._selected(gbids)
        found, elsewhere = self._lookup_domains(domains, interface_name, selected)
        if not found and (elsewhere or self.variant == v.EMPTY_LOOKUP_ERROR):
            raise DiscoveryErrorException(
                DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS,
                f"{interface_name!r} in {list(domains)!r} is registered only outside "
                f"{list(selected)!r}",
            )
        return found

    def lookup_domains_old(
        self, domains: Sequence[str], interface_name: str
    ) -> list[GlobalDiscoveryEntry]:
        """Old lookup: providers registered in the own GBID; an empty list when none is."""
        return self._lookup_domains(domains, interface_name, (self.own_gbid,))[0]

    def _lookup_domains(
        self, domains: Sequence[str], interface_name: str, selected: tuple[str, ...]
    ) -> tuple[list[GlobalDiscoveryEntry], bool]:
        domains = check_str_list(domains, "domains")
        check_str(interface_name, "interface_name")
        with self.store.transaction() as tx:
            rows = self._visible(tx.rows_for_interface(domains, interface_name))
        by_participant: dict[str, list[GcdRow]] = {}
        for row in rows:
            by_participant.setdefault(row.participant_id, []).append(row)
        found = []
        for participant_id in sorted(by_participant):
            found.extend(r.entry for r in self._picks(by_participant[participant_id], selected))
        return found, bool(rows)

    def lookup_participant(self, participant_id: str, gbids: Sequence[str]) -> GlobalDiscoveryEntry:
        selected = self._selected(gbids)
        check_str(participant_id, "participant_id")
        rows = self._visible_rows_for(participant_id)
        if not rows:
            raise DiscoveryErrorException(
                DiscoveryError.NO_ENTRY_FOR_PARTICIPANT, f"participant_id {participant_id!r}"
            )
        best = self._picks(rows, selected)
        if not best:
            raise DiscoveryErrorException(
                DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS,
                f"participant_id {participant_id!r} is registered only in "
                f"{[r.gbid for r in rows]!r}, not in {list(selected)!r}",
            )
        return best[0].entry

    def lookup_participant_old(self, participant_id: str) -> GlobalDiscoveryEntry:
        """Old lookup: the entry in the own GBID, else ProviderRuntimeException."""
        check_str(participant_id, "participant_id")
        rows = self._visible_rows_for(participant_id)
        best = self._picks(rows, (self.own_gbid,))
        if not best:
            # The old interface has no modeled errors; joynr names the DiscoveryError in the
            # message of the ProviderRuntimeException instead.
            error = DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS if rows else DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
            raise ProviderRuntimeException(
                f"{error.value}: no entry for participant {participant_id!r} in backend {self.own_gbid!r}"
            )
        return best[0].entry

    def _visible_rows_for(self, participant_id: str) -> list[GcdRow]:
        with self.store.transaction() as tx:
            return self._visible(tx.rows_for_participant(participant_id))

    def _visible(self, rows: list[GcdRow]) -> list[GcdRow]:
        """The rows a lookup may return: not expired and, with a last-seen timeout, not outdated."""
        now = self.clock()
        timeout = None if self.variant == v.RETURNS_OUTDATED else self.last_seen_timeout_ms
        return [r for r in rows if alive(r, now) and seen_since(r, now, timeout)]

    def _picks(self, rows: list[GcdRow], selected: tuple[str, ...]) -> list[GcdRow]:
        if self.variant == v.IGNORES_GBIDS:
            selected = self._everywhere()
        return picks(rows, selected, self.own_gbid, per_gbid=self.variant == v.ENTRY_PER_GBID)

    # -- remove ----------------------------------------------------------------------------

    def remove(self, participant_id: str, gbids: Sequence[str]) -> list[RowKey]:
        """Remove the provider from every listed GBID, or from none.

        A listed GBID without a row: NO_ENTRY_FOR_SELECTED_BACKENDS (nothing is removed);
        no row at all: NO_ENTRY_FOR_PARTICIPANT.
        """
        selected = self._selected(gbids)
        check_str(participant_id, "participant_id")
        now = self.clock()
        with self.store.transaction(write=True) as tx:
            registered = [r.gbid for r in tx.rows_for_participant(participant_id) if alive(r, now)]
            if self.variant == v.REMOVE_ALL_GBIDS:
                selected = tuple(registered)  # and, as the old remove, nothing there is no error
            elif self.variant == v.IGNORES_GBIDS and registered:
                selected = tuple(registered)
            if not registered and self.variant != v.REMOVE_ALL_GBIDS:
                raise DiscoveryErrorException(
                    DiscoveryError.NO_ENTRY_FOR_PARTICIPANT, f"participant_id {participant_id!r}"
                )
            missing = [g for g in selected if g not in registered]
            if missing:
                raise DiscoveryErrorException(
                    DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS,
                    f"participant_id {participant_id!r} is not registered in {missing!r}",
                )
            for gbid in selected:
                tx.delete((participant_id, gbid))
        return [(participant_id, g) for g in selected]

    def remove_old(self, participant_ids: str | Sequence[str]) -> list[RowKey]:
        """Old remove: drop the rows of the own GBID; absent participants are no error."""
        if isinstance(participant_ids, str):
            participant_ids = [participant_ids]
        ids = check_str_list(participant_ids, "participant_ids")
        everywhere = self.variant in (v.REMOVE_ALL_GBIDS, v.IGNORES_GBIDS)
        now = self.clock()
        removed: list[RowKey] = []
        with self.store.transaction(write=True) as tx:
            for participant_id in dict.fromkeys(ids):
                for row in tx.rows_for_participant(participant_id):
                    if (everywhere or row.gbid == self.own_gbid) and alive(row, now):
                        tx.delete(row.key)
                        removed.append(row.key)
        return removed

    def remove_stale(self, cluster_controller_id: str, max_last_seen_date_ms: int) -> list[RowKey]:
        """Remove the cluster controller's rows (every GBID) last seen before the bound."""
        check_str(cluster_controller_id, "cluster_controller_id")
        check_int(max_last_seen_date_ms, "max_last_seen_date_ms")
        if self.variant == v.NO_REMOVE_STALE:
            return []
        now = self.clock()
        removed: list[RowKey] = []
        with self.store.transaction(write=True) as tx:
            for row in tx.rows_for_cluster_controller(cluster_controller_id):
                if alive(row, now) and row.entry.last_seen_date_ms < max_last_seen_date_ms:
                    tx.delete(row.key)
                    removed.append(row.key)
        return removed

    # -- freshness -------------------------------------------------------------------------

    def touch(
        self, cluster_controller_id: str, participant_ids: Sequence[str] | None = None
    ) -> list[RowKey]:
        """Refresh the cluster controller's rows in every GBID.

        With participant ids (new touch): last seen = now and expiry = now + the default
        expiry, for those participants only. Without (old touch): last seen = now for all
        its rows, expiry unchanged. Returns the rows touched.
        """
        check_str(cluster_controller_id, "cluster_controller_id")
        wanted = None if participant_ids is None else set(
            check_str_list(participant_ids, "participant_ids"))
        if wanted is None and self.variant == v.OLD_TOUCH_IGNORED:
            return []
        extend = self.variant != v.TOUCH_KEEPS_EXPIRY
        now = self.clock()
        touched: list[RowKey] = []
        with self.store.transaction(write=True) as tx:
            for row in tx.rows_for_cluster_controller(cluster_controller_id):
                if not alive(row, now):
                    continue
                if wanted is None:
                    entry = replace(row.entry, last_seen_date_ms=now)
                elif row.participant_id in wanted:
                    entry = replace(row.entry, last_seen_date_ms=now)
                    if extend:
                        entry = replace(entry, expiry_date_ms=now + self.default_expiry_ms)
                else:
                    continue
                tx.put(GcdRow(entry, row.gbid))
                touched.append(row.key)
        return touched

    def purge_expired(self) -> list[RowKey]:
        """Delete every row whose expiry date lies before now; return what went."""
        now = self.clock()
        with self.store.transaction(write=True) as tx:
            return tx.delete_expired(now)

    def purge_not_seen_since(self, bound_ms: int) -> list[RowKey]:
        """Delete every row last seen (added or touched) before ``bound_ms``: seed 001's
        cleanup of entries whose cluster controller stopped refreshing them."""
        check_int(bound_ms, "bound_ms")
        with self.store.transaction(write=True) as tx:
            return tx.delete_last_seen_before(bound_ms)
