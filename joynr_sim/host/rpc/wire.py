"""Routing entries and put results on the control protocol's wire.

An address travels in joynr's JSON form (``core.address.to_dict``), parsed as it is decoded;
an InProcess address, which only means something in its own process, is named by its
participant (``RemoteInProcess``) and is only ever reported by a host, never accepted by one
(``ops.AddNextHop``).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ...core.address import AddressError, InProcessAddress, from_dict, to_dict
from ...core.routing import PutResult, RoutingEntry
from .framing import FieldError

IN_PROCESS = "InProcess"


class RemoteInProcess:
    """What an InProcess address in a host process looks like from the runner: a name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"RemoteInProcess({self.name})"


class WireEntry(msgspec.Struct, forbid_unknown_fields=True):
    address: dict[str, Any]
    visible: bool
    expiry: int
    sticky: bool

    def __post_init__(self) -> None:
        self._address()  # a hostile address is refused where it enters

    @property
    def in_process(self) -> bool:
        return self.address.get("_typeName") == IN_PROCESS

    def _address(self) -> Any:
        if self.in_process:
            if set(self.address) != {"_typeName", "id"} or not isinstance(self.address["id"], str):
                raise FieldError("address", "an InProcess address is {_typeName, id}")
            return InProcessAddress(RemoteInProcess(self.address["id"]))
        try:
            return from_dict(self.address)
        except AddressError as exc:
            raise FieldError("address", str(exc)) from None

    @classmethod
    def of(cls, entry: RoutingEntry | None) -> WireEntry | None:
        if entry is None:
            return None
        if isinstance(entry.address, InProcessAddress):
            skeleton = entry.address.skeleton
            address = {"_typeName": IN_PROCESS, "id": str(getattr(skeleton, "participant_id", id(skeleton)))}
        else:
            address = to_dict(entry.address)
        return cls(address, entry.is_globally_visible, entry.expiry_date_ms, entry.is_sticky)

    def routing_entry(self) -> RoutingEntry:
        return RoutingEntry(self._address(), self.visible, self.expiry, self.sticky)


class WirePutResult(msgspec.Struct, forbid_unknown_fields=True):
    outcome: str
    reason: str
    entry: WireEntry | None

    @classmethod
    def of(cls, result: PutResult) -> WirePutResult:
        return cls(result.outcome, result.reason, WireEntry.of(result.entry))

    def put_result(self) -> PutResult:
        return PutResult(self.outcome, self.reason, None if self.entry is None else self.entry.routing_entry())
