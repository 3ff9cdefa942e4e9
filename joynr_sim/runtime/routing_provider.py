"""joynr's routing provider of a cluster controller: its libjoynr runtimes add and remove
their participants (next hops) and multicast receivers here."""

from __future__ import annotations

from ..core.address import AddressError, from_json
from ..core.limits import InvalidField, check_id
from ..core.multicast import MulticastError, MulticastId, parse
from ..core.routing import RoutingEntry
from .base import FOREVER_MS, Runtime, offer_route


def routing_provider_participant_id(cc_id: str) -> str:
    return f"{cc_id}-routingprovider"


class RoutingProvider:
    """joynr's routing provider: libjoynr runtimes add and remove their participants here."""

    interface_name = "joynr/system/Routing"

    def __init__(self, routes: Runtime) -> None:
        self._routes = routes

    def addNextHop(self, participantId: str, address: str, isGloballyVisible: bool) -> None:
        try:
            parsed = from_json(address)
        except AddressError as exc:
            raise ValueError(str(exc)) from None
        offer_route(self._routes, participantId, RoutingEntry(parsed, bool(isGloballyVisible), FOREVER_MS),
                    "routing-provider")

    def removeNextHop(self, participantId: str) -> None:
        self._routes.node.remove_next_hop(participantId)

    async def addMulticastReceiver(self, multicastId: str, subscriberParticipantId: str,
                                   providerParticipantId: str) -> None:
        mid = self._multicast(multicastId, providerParticipantId)
        await self._routes.add_multicast_receiver(mid, _participant(subscriberParticipantId))

    async def removeMulticastReceiver(self, multicastId: str, subscriberParticipantId: str,
                                      providerParticipantId: str) -> None:
        mid = self._multicast(multicastId, providerParticipantId)
        await self._routes.remove_multicast_receiver(mid, _participant(subscriberParticipantId))

    @staticmethod
    def _multicast(multicast_id: object, provider: object) -> MulticastId:
        try:
            mid = parse(multicast_id, wildcards=True)  # type: ignore[arg-type]
        except MulticastError as exc:
            raise ValueError(f"multicastId: {exc}") from None
        if mid.provider != provider:
            raise ValueError(f"multicastId: {multicast_id!r} is not a multicast of provider {provider!r}")
        return mid

    def resolveNextHop(self, participantId: str) -> bool:
        return participantId in self._routes.table


def _participant(value: object) -> str:
    try:
        return check_id(value, "subscriberParticipantId")
    except InvalidField as exc:
        raise ValueError(str(exc)) from None
