"""The memory network: a simulation's brokers, WebSocket servers and links in this
process, driven by one virtual-time loop (``virtual_loop``) and one seed.

``MemoryNetwork`` is what a runtime asks for its connections (the ``Network`` of
``transport.network``): an MQTT connection to the broker of a GBID over the runtime's link
to it, a WebSocket server at a host and port, a client to one. ``MemoryBrokers`` stands
where ``brokers.BrokerSet`` stands for a simulation: the brokers' lifecycle and logins,
with the same trace events. Every link is made here, one per (runtime, GBID) and one per
libjoynr runtime to its cluster controller, each with its own generator seeded from the
run's seed and the link's name: the fault API (``faults.links.Faults``) faults them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from brokers import access

from .links import MemoryLink
from .mqtt_broker import MemoryBroker
from .mqtt_client import MemoryMqttConnection
from .websocket import MemoryWebSocketClient, MemoryWebSocketServer

if TYPE_CHECKING:
    from ..trace import TraceWriter

FIRST_PORT = 20000  # where the memory network's WebSocket ports begin: any number serves


class BrokerRefused(RuntimeError):
    """A broker operation that does not apply (a crash of a broker that is down, ...)."""


class MemoryBrokers:
    """The brokers of a simulation on the memory network, one per GBID."""

    kind = "memory"
    autosave = 1

    def __init__(self, gbids: list[str], seed: int | str | None, trace: TraceWriter | None = None) -> None:
        self.gbids = list(gbids)
        self.trace = trace
        # Passwords are checked as on a real broker; the secret need not be secret here.
        self._secret = f"memory/{seed}"
        self._brokers = {gbid: MemoryBroker(gbid, self._secret) for gbid in self.gbids}

    def broker(self, gbid: str) -> MemoryBroker:
        try:
            return self._brokers[gbid]
        except KeyError:
            raise ValueError(f"gbid: unknown GBID {gbid!r}; this broker set has {self.gbids}") from None

    # -- what a BrokerSet answers -----------------------------------------------------------
    def endpoint(self, gbid: str) -> tuple[str, int]:
        return ("memory", self.gbids.index(self.broker(gbid).gbid))

    def url(self, gbid: str) -> str:
        return f"memory://{self.broker(gbid).gbid}"

    def credentials(self, client_id: str, gbid: str | None = None) -> tuple[str, str]:
        access.check_client_id(client_id)
        return client_id, access.password(self._secret, client_id)

    def admin_credentials(self, gbid: str | None = None) -> tuple[str, str]:
        return access.ADMIN_USERNAME, access.password(self._secret, access.ADMIN_USERNAME)

    def admit(self, client_ids: list[str]) -> None:
        for client_id in client_ids:
            access.check_client_id(client_id)

    def is_running(self, gbid: str) -> bool:
        return self.broker(gbid).running

    def pid(self, gbid: str) -> int | None:
        return None  # no process: a broker of the memory network lives in the runner's

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        for broker in self._brokers.values():
            if not broker.running:
                broker.start()
                self._emit("life.start", broker)

    async def stop(self) -> None:
        for broker in self._brokers.values():
            if broker.running:
                broker.stop()
                self._emit("life.stop", broker)

    async def start_broker(self, gbid: str) -> None:
        broker = self.broker(gbid)
        if broker.running:
            raise BrokerRefused(f"gbid {gbid!r}: broker already running")
        broker.start()
        self._emit("life.start", broker)

    async def stop_broker(self, gbid: str) -> None:
        broker = self.broker(gbid)
        if not broker.running:
            raise BrokerRefused(f"gbid {gbid!r}: broker not running")
        broker.stop()
        self._emit("life.stop", broker)

    async def crash_broker(self, gbid: str) -> None:
        broker = self.broker(gbid)
        if not broker.running:
            raise BrokerRefused(f"gbid {gbid!r}: broker not running, nothing to crash")
        broker.crash()
        self._emit("life.crash", broker)

    async def restart_broker(self, gbid: str) -> None:
        broker = self.broker(gbid)
        if broker.running:
            broker.stop()
            self._emit("life.stop", broker)
        broker.start()
        self._emit("life.restart", broker)

    def _emit(self, ev: str, broker: MemoryBroker) -> None:
        if self.trace is not None:
            self.trace.emit(ev, target=f"broker-{broker.gbid}", target_kind="broker", gbid=broker.gbid,
                            port=self.endpoint(broker.gbid)[1])


class MemoryNetwork:
    name = "memory"

    def __init__(self, gbids: list[str], seed: int | str | None, trace: TraceWriter | None = None) -> None:
        self.seed = seed
        self.brokers = MemoryBrokers(gbids, seed, trace)
        self._links: dict[tuple[str, str | None], MemoryLink] = {}
        self._servers: dict[tuple[str, int], MemoryWebSocketServer] = {}
        self._ports = itertools.count(FIRST_PORT)

    def link(self, runtime_id: str, gbid: str | None) -> MemoryLink:
        """The link of a runtime to the broker of ``gbid`` (None: to its cluster controller)."""
        key = (runtime_id, gbid)
        if key not in self._links:
            self._links[key] = MemoryLink(f"{runtime_id}/{gbid or 'ws'}", self.seed)
        return self._links[key]

    async def fault_link(self, name: str, runtime_id: str, gbid: str | None,
                         upstream: Callable[[], tuple[str, int]]) -> MemoryLink:
        """What ``Faults`` makes in place of a fault proxy: the runtime's link itself."""
        return self.link(runtime_id, gbid)

    # -- the Network interface ------------------------------------------------------------------
    def mqtt_connection(self, *, runtime_id: str, gbid: str, **kwargs: Any) -> MemoryMqttConnection:
        for unused in ("host", "port", "loop"):
            kwargs.pop(unused, None)
        return MemoryMqttConnection(broker=self.brokers.broker(gbid), link=self.link(runtime_id, gbid),
                                    gbid=gbid, **kwargs)

    def websocket_server(self, **kwargs: Any) -> MemoryWebSocketServer:
        return MemoryWebSocketServer(self, **kwargs)

    def websocket_client(self, url: str, client_id: str, **kwargs: Any) -> MemoryWebSocketClient:
        return MemoryWebSocketClient(self, url, client_id, **kwargs)

    # -- WebSocket addresses ----------------------------------------------------------------------
    def listen(self, server: MemoryWebSocketServer, host: str, port: int) -> int:
        """Bind ``server`` at host:port (0: the next free port); a port in use is refused."""
        if port == 0:
            port = next(self._ports)
            while (host, port) in self._servers:
                port = next(self._ports)
        if (host, port) in self._servers:
            raise OSError(98, f"address {host}:{port} already in use on the memory network")
        self._servers[(host, port)] = server
        return port

    def unlisten(self, server: MemoryWebSocketServer) -> None:
        for address in [a for a, s in self._servers.items() if s is server]:
            del self._servers[address]

    def server_at(self, address: tuple[str, int]) -> MemoryWebSocketServer | None:
        return self._servers.get(address)
