"""The global capabilities directory (GCD) across several backends (GBIDs).

One instance serves one backend (its own GBID) and shares its store with the instances
of every other backend, so all of them know all providers. The store holds one row per
(participantId, GBID); a row's address is always ``MqttAddress(<its GBID>, <topic>)``
whatever the caller sent, and the topic is the cluster controller id of the provider.

Methods with a ``gbids`` parameter are the new interface (GlobalCapabilitiesDirectory.fidl
0.3): they raise ``DiscoveryErrorException`` carrying a modeled ``DiscoveryError``. The
``*_old`` methods serve old cluster controllers: they act on the own GBID only and never
raise a modeled error; where joynr answers with a generic failure (old participant lookup
that finds nothing) they raise ``ProviderRuntimeException``.

Checks run before anything is read or written: first the GBID list (left to right), then
the other arguments. A malformed discovery entry, including one whose address is not an
MqttAddress (the GCD keeps backends apart by the MQTT broker URI, so any other address
type has no place here), raises ``InvalidDiscoveryEntry`` (a ValueError naming the field):
no modeled GcdError fits, so the GCD service answers it as a ProviderRuntimeException with
that message. Other malformed arguments raise ``InvalidDiscoveryArgument``.

Every call runs in one transaction of its store (any ``GcdStore``, see
``joynr_sim.core.gcd_store``; the GCD service gives it SQLite or PostgreSQL): a rejected
call changes nothing. A row whose expiry date lies before ``clock()`` is treated as absent
by every call (it is never returned, removed, touched or counted as registered) until
``purge_expired`` deletes it.

Lookups return one entry per participantId, the "best" of the selected GBIDs: the own
GBID when the provider is registered there, else the first selected GBID (in the
caller's order) where it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .address import MqttAddress
from .discovery import (
    DEFAULT_EXPIRY_MS,
    DiscoveryError,
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    InvalidDiscoveryEntry,
    ProviderRuntimeException,
    check_str,
    check_str_list,
    validate_gbids,
)
from .gcd_store import GcdRow, GcdStore, GcdTransaction, RowKey
from .limits import InvalidField, check_unicast_topic

DEFAULT_GBID = "joynrdefaultgbid"

# joynr's well-known ids of the GCD: its provider's participant id, and the channel (the
# MQTT client id and topic) every instance serves on, one per backend.
GCD_PARTICIPANT_ID = "capabilitiesdirectory_participantid"
GCD_TOPIC = "discoverydirectory_channelid"
GCD_INTERFACE = "infrastructure/GlobalCapabilitiesDirectory"


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
        self.store = store
        self.own_gbid = own_gbid
        self.known_gbids = known
        self.clock = clock
        self.default_expiry_ms = default_expiry_ms

    # -- add -------------------------------------------------------------------------------

    def add(
        self, entry: GlobalDiscoveryEntry | Mapping[str, Any], gbids: Sequence[str]
    ) -> AddResult:
        """Register ``entry`` in each listed GBID; rows in unlisted GBIDs are kept."""
        selected = validate_gbids(gbids, self.known_gbids)
        checked = _check_entry(entry)
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
        checked = [_check_entry(e) for e in entries]
        with self.store.transaction(write=True) as tx:
            return [self._put(tx, e, (self.own_gbid,)) for e in checked]

    def _put(
        self, tx: GcdTransaction, entry: GlobalDiscoveryEntry, gbids: tuple[str, ...]
    ) -> AddResult:
        now = self.clock()
        existing = {r.gbid for r in tx.rows_for_participant(entry.participant_id) if _alive(r, now)}
        topic = entry.address.topic  # type: ignore[union-attr]
        for gbid in gbids:
            tx.put(GcdRow(entry.with_address(MqttAddress(gbid, topic)), gbid))
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
        selected = validate_gbids(gbids, self.known_gbids)
        found, elsewhere = self._lookup_domains(domains, interface_name, selected)
        if not found and elsewhere:
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
        now = self.clock()
        with self.store.transaction() as tx:
            rows = [r for r in tx.rows_for_interface(domains, interface_name) if _alive(r, now)]
        by_participant: dict[str, list[GcdRow]] = {}
        for row in rows:
            by_participant.setdefault(row.participant_id, []).append(row)
        found = []
        for participant_id in sorted(by_participant):
            best = self._best(by_participant[participant_id], selected)
            if best is not None:
                found.append(best.entry)
        return found, bool(rows)

    def lookup_participant(self, participant_id: str, gbids: Sequence[str]) -> GlobalDiscoveryEntry:
        selected = validate_gbids(gbids, self.known_gbids)
        check_str(participant_id, "participant_id")
        rows = self._alive_rows_for(participant_id)
        if not rows:
            raise DiscoveryErrorException(
                DiscoveryError.NO_ENTRY_FOR_PARTICIPANT, f"participant_id {participant_id!r}"
            )
        best = self._best(rows, selected)
        if best is None:
            raise DiscoveryErrorException(
                DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS,
                f"participant_id {participant_id!r} is registered only in "
                f"{[r.gbid for r in rows]!r}, not in {list(selected)!r}",
            )
        return best.entry

    def lookup_participant_old(self, participant_id: str) -> GlobalDiscoveryEntry:
        """Old lookup: the entry in the own GBID, else ProviderRuntimeException."""
        check_str(participant_id, "participant_id")
        rows = self._alive_rows_for(participant_id)
        best = self._best(rows, (self.own_gbid,))
        if best is None:
            # The old interface has no modeled errors; joynr names the DiscoveryError in the
            # message of the ProviderRuntimeException instead.
            error = DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS if rows else DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
            raise ProviderRuntimeException(
                f"{error.value}: no entry for participant {participant_id!r} in backend {self.own_gbid!r}"
            )
        return best.entry

    def _alive_rows_for(self, participant_id: str) -> list[GcdRow]:
        now = self.clock()
        with self.store.transaction() as tx:
            return [r for r in tx.rows_for_participant(participant_id) if _alive(r, now)]

    def _best(self, rows: Iterable[GcdRow], selected: tuple[str, ...]) -> GcdRow | None:
        by_gbid = {r.gbid: r for r in rows if r.gbid in selected}
        if self.own_gbid in by_gbid:
            return by_gbid[self.own_gbid]
        for gbid in selected:
            if gbid in by_gbid:
                return by_gbid[gbid]
        return None

    # -- remove ----------------------------------------------------------------------------

    def remove(self, participant_id: str, gbids: Sequence[str]) -> list[RowKey]:
        """Remove the provider from every listed GBID, or from none.

        A listed GBID without a row: NO_ENTRY_FOR_SELECTED_BACKENDS (nothing is removed);
        no row at all: NO_ENTRY_FOR_PARTICIPANT.
        """
        selected = validate_gbids(gbids, self.known_gbids)
        check_str(participant_id, "participant_id")
        now = self.clock()
        with self.store.transaction(write=True) as tx:
            registered = {r.gbid for r in tx.rows_for_participant(participant_id) if _alive(r, now)}
            if not registered:
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
        now = self.clock()
        removed: list[RowKey] = []
        with self.store.transaction(write=True) as tx:
            for participant_id in dict.fromkeys(ids):
                for row in tx.rows_for_participant(participant_id):
                    if row.gbid == self.own_gbid and _alive(row, now):
                        tx.delete(row.key)
                        removed.append(row.key)
        return removed

    def remove_stale(self, cluster_controller_id: str, max_last_seen_date_ms: int) -> list[RowKey]:
        """Remove the cluster controller's rows (every GBID) last seen before the bound."""
        check_str(cluster_controller_id, "cluster_controller_id")
        _check_int(max_last_seen_date_ms, "max_last_seen_date_ms")
        now = self.clock()
        removed: list[RowKey] = []
        with self.store.transaction(write=True) as tx:
            for row in tx.rows_for_cluster_controller(cluster_controller_id):
                if _alive(row, now) and row.entry.last_seen_date_ms < max_last_seen_date_ms:
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
        now = self.clock()
        touched: list[RowKey] = []
        with self.store.transaction(write=True) as tx:
            for row in tx.rows_for_cluster_controller(cluster_controller_id):
                if not _alive(row, now):
                    continue
                if wanted is None:
                    entry = replace(row.entry, last_seen_date_ms=now)
                elif row.participant_id in wanted:
                    entry = replace(row.entry, last_seen_date_ms=now,
                                    expiry_date_ms=now + self.default_expiry_ms)
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
        _check_int(bound_ms, "bound_ms")
        with self.store.transaction(write=True) as tx:
            return tx.delete_last_seen_before(bound_ms)


def _alive(row: GcdRow, now: int) -> bool:
    return row.entry.expiry_date_ms >= now


def _check_int(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidDiscoveryArgument(field, f"expected int, got {value!r}")
    return value


def _check_entry(entry: Any) -> GlobalDiscoveryEntry:
    """A GlobalDiscoveryEntry (or its wire form) with a usable MqttAddress."""
    if isinstance(entry, Mapping):
        entry = GlobalDiscoveryEntry.from_wire(entry)
    if not isinstance(entry, GlobalDiscoveryEntry):
        raise InvalidDiscoveryEntry("entry", f"expected a GlobalDiscoveryEntry, got {entry!r}")
    address = entry.address
    if not isinstance(address, MqttAddress):
        raise InvalidDiscoveryEntry(
            "address", f"expected an MqttAddress, got {type(address).__name__} {address!r}"
        )
    if address.topic == "":
        raise InvalidDiscoveryEntry("address.topic", "empty; it names the cluster controller")
    try:  # a consumer's cluster controller publishes to <topic>/low: one level, as the grants allow
        check_unicast_topic(address.topic, "address.topic")
    except InvalidField as exc:
        raise InvalidDiscoveryEntry("address.topic", str(exc).partition(": ")[2]) from None
    return entry
