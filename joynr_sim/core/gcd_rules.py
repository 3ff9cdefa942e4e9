"""The small rules the GCD (``core.gcd``) applies on every call: which entries it accepts,
which GBIDs a call selects, which rows count, and which row a lookup returns per provider.

Kept apart from the directory's methods so each rule, and the variant that breaks it
(``core.gcd_variants``), sits in one place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .address import ChannelAddress, MqttAddress
from .discovery import (
    DiscoveryError,
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    InvalidDiscoveryEntry,
    validate_gbids,
)
from .gcd_store import GcdRow
from .limits import InvalidField, check_unicast_topic


def select_gbids(gbids: Any, known: Sequence[str], own: str, checked: bool = True) -> tuple[str, ...]:
    """The GBIDs a new method acts on: ``gbids`` as given, after the INVALID_GBID and
    UNKNOWN_GBID checks. Unchecked (``gcd:no-gbid-errors``): an empty GBID, or none at all,
    stands for the own one, a repeated GBID counts once and an unknown one is used as given."""
    if checked:
        return validate_gbids(gbids, known)
    if not isinstance(gbids, (list, tuple)) or not gbids:
        return (own,)
    if not all(isinstance(g, str) for g in gbids):
        raise DiscoveryErrorException(DiscoveryError.INVALID_GBID, f"gbids: not strings: {list(gbids)!r}")
    return tuple(dict.fromkeys(g or own for g in gbids))


def own_first(own: str, known: Sequence[str]) -> tuple[str, ...]:
    return (own, *(g for g in known if g != own))


def alive(row: GcdRow, now: int) -> bool:
    """Not expired: an expired row is absent for every call until it is purged."""
    return row.entry.expiry_date_ms >= now


def seen_since(row: GcdRow, now: int, last_seen_timeout_ms: int | None) -> bool:
    """Not outdated: last seen within the timeout (always, without one). The sweep deletes
    exactly the rows this refuses (last seen before ``now - timeout``)."""
    return last_seen_timeout_ms is None or row.entry.last_seen_date_ms >= now - last_seen_timeout_ms


def picks(rows: Iterable[GcdRow], selected: Sequence[str], own: str, per_gbid: bool = False) -> list[GcdRow]:
    """What a lookup returns of one provider's rows: one row, the own GBID's when it is
    selected and registered, else the first selected GBID's (in the caller's order) that is;
    none when no selected GBID has one. ``per_gbid`` (``gcd:entry-per-gbid``): every
    selected GBID's row, in the caller's order."""
    by_gbid = {r.gbid: r for r in rows if r.gbid in selected}
    ordered = [by_gbid[g] for g in selected if g in by_gbid]
    if per_gbid or not ordered:
        return ordered
    return [by_gbid[own]] if own in by_gbid else ordered[:1]


def check_int(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidDiscoveryArgument(field, f"expected int, got {value!r}")
    return value


def check_entry(entry: Any) -> GlobalDiscoveryEntry:
    """A GlobalDiscoveryEntry (or its wire form) with a global address a cluster controller
    has: an MqttAddress (its topic names the cluster controller) or, from joynr's HTTP
    transport, a ChannelAddress (its channel id does). joynr's GCD refuses any other type."""
    if isinstance(entry, Mapping):
        entry = GlobalDiscoveryEntry.from_wire(entry)
    if not isinstance(entry, GlobalDiscoveryEntry):
        raise InvalidDiscoveryEntry("entry", f"expected a GlobalDiscoveryEntry, got {entry!r}")
    address = entry.address
    if isinstance(address, ChannelAddress):
        if address.channel_id == "":
            raise InvalidDiscoveryEntry("address.channel_id", "empty; it names the cluster controller")
        return entry
    if not isinstance(address, MqttAddress):
        raise InvalidDiscoveryEntry(
            "address", f"expected an MqttAddress or a ChannelAddress, got {type(address).__name__} {address!r}"
        )
    if address.topic == "":
        raise InvalidDiscoveryEntry("address.topic", "empty; it names the cluster controller")
    try:  # a consumer's cluster controller publishes to <topic>/low: one level, as the grants allow
        check_unicast_topic(address.topic, "address.topic")
    except InvalidField as exc:
        raise InvalidDiscoveryEntry("address.topic", str(exc).partition(": ")[2]) from None
    return entry


def row_in(entry: GlobalDiscoveryEntry, gbid: str) -> GcdRow:
    """The entry registered in ``gbid``: an MqttAddress gets the GBID as its broker URI,
    whatever the caller sent (seed 001); a ChannelAddress is kept as sent."""
    address = entry.address
    if isinstance(address, MqttAddress):
        entry = entry.with_address(MqttAddress(gbid, address.topic))
    return GcdRow(entry, gbid)
