"""The handles of each kind of runtime in a host process: what a cluster controller and a
libjoynr runtime add to ``handles.RemoteRuntime``, their create spec and, for a cluster
controller, its own ops (a ``ClusterControllerHandle``, ``joynr_sim.runtime.handle``)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from typing import Any

from ...core.address import Address, WebSocketAddress, WebSocketClientAddress, to_dict
from ...runtime.cluster_controller import CcAddresses, ClusterController, routing_provider_participant_id
from ...runtime.libjoynr import LibjoynrRuntime
from ...runtime.mqtt_endpoint import BrokerDirectory
from . import ops
from .handles import RemoteRuntime
from .host_handle import HostHandle
from .remote_views import RemoteConnection


class RemoteClusterController(CcAddresses, RemoteRuntime):
    kind = ClusterController.kind

    def __init__(
        self, cc_id: str, gbids: Sequence[str], brokers: BrokerDirectory, *, runtime_id: str | None = None,
        provisioned: Sequence[tuple[str, Address, bool]] = (), **kwargs: Any,
    ) -> None:
        self.cc_id = cc_id
        self.gbids = tuple(gbids)
        if not self.gbids:
            raise ValueError(f"gbids: a cluster controller needs at least one GBID ({cc_id!r})")
        self.topic = self.client_id = cc_id
        self.routing_provider_id = routing_provider_participant_id(cc_id)
        self.brokers = brokers
        self.provisioned = [(pid, to_dict(address), bool(visible)) for pid, address, visible in provisioned]
        self.ws_port = 0
        self.tokens: dict[str, str] = {}  # kept here, so every process of the controller is given them
        super().__init__(runtime_id or cc_id, **kwargs)

    @ops.asks(ops.Admit)
    async def admit(self, runtime_id: str, token: str | None = None) -> str:
        """Provision a libjoynr runtime: the token its WebSocket handshake must carry (a new
        one unless ``token`` is given), handed to the running controller over the control
        channel. (A blocking query held the runner's event loop until the host answered:
        with busy hosts, a fleet's libjoynr runtimes started one at a time.)"""
        known = self.tokens.get(runtime_id)
        token = token or known or secrets.token_hex(16)
        if token != known:
            self.tokens[runtime_id] = token
            if self.running:
                await self.ask(ops.Admit(runtime=self.runtime_id, client=runtime_id, token=token))
        return token

    @ops.asks(ops.Connected)
    async def connected(self, gbid: str) -> bool:
        if not self.running:
            return False
        return await self.ask(ops.Connected(runtime=self.runtime_id, gbid=gbid))

    @ops.asks(ops.Cut)
    async def cut(self, gbid: str) -> None:
        await self.ask(ops.Cut(runtime=self.runtime_id, gbid=gbid))

    @ops.asks(ops.Heal)
    async def heal(self, gbid: str) -> None:
        await self.ask(ops.Heal(runtime=self.runtime_id, gbid=gbid))

    @property
    def mqtt(self) -> dict[str, RemoteConnection]:
        """A read view of its MQTT connections, for callers that do not await."""
        return {gbid: RemoteConnection(self, gbid) for gbid in self.gbids}

    async def _log_in(self) -> None:
        # A client id new to Mosquitto waits until the brokers have reloaded their logins,
        # a reload that costs more the more clients are connected: in a thread, the runner
        # goes on meanwhile, and the logins of cluster controllers starting together share
        # one reload. _spec then finds them loaded.
        await asyncio.to_thread(lambda: [self.brokers.credentials(self.client_id, g) for g in self.gbids])

    def _spec(self) -> dict[str, Any]:
        brokers = {}
        for gbid in self.gbids:  # resolved at every start: a fault proxy or broker may have moved
            host, port = self.brokers.endpoint(gbid)
            username, password = self.brokers.credentials(self.client_id, gbid) or (None, None)
            brokers[gbid] = {"host": host, "port": port, "username": username, "password": password}
        return {**super()._spec(), "cc_id": self.cc_id, "gbids": list(self.gbids), "brokers": brokers,
                "provisioned": [list(p) for p in self.provisioned], "ws_host": self.ws_host, "ws_port": self.ws_port,
                "tokens": dict(self.tokens)}

    def _placed(self, process: HostHandle) -> None:
        self.ws_host = process.address  # a host joined from another machine listens on its own

    def _started(self, result: ops.Started) -> None:
        if result["ws_port"] is not None:
            self.ws_port = result["ws_port"]


class RemoteLibjoynr(RemoteRuntime):
    kind = LibjoynrRuntime.kind

    def __init__(self, runtime_id: str, cc_id: str, cc_address: WebSocketAddress, *, token: str | None = None,
                 **kwargs: Any) -> None:
        self.cc_id = cc_id
        self.cc_address = cc_address
        self.token = token
        super().__init__(runtime_id, **kwargs)

    @property
    def client_address(self) -> WebSocketClientAddress:
        return WebSocketClientAddress(self.runtime_id)

    def _spec(self) -> dict[str, Any]:
        return {**super()._spec(), "cc_id": self.cc_id, "cc_address": to_dict(self.cc_address), "token": self.token}
