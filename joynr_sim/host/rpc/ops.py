"""The operations of the control protocol, each defined once: one struct per op.

A struct is its op's arguments, their types and bounds, checked by msgspec as a request is
decoded (``validate_request``: a field that breaks them is a ``ProtocolError`` naming
``op.field``); its tag is the op's name, sent as the request's ``op``; ``query`` says it
answers at once (no waiting on the network), so it may also be asked on the blocking query
channel; ``result`` is its result's type, which the runner checks the answer against
(``Op.answer``); ``timeout_s`` is how long the runner waits for it.

The host carries out each op in its handler of the same name (``dispatch.Host.on_<op>``);
the runner asks each from a method marked ``@asks(op)`` on a runtime's handle (``handles``)
or a host's (``host_handle``). ``tests/test_runtime_api.py`` holds ops, handlers, askers and
``joynr_sim.runtime.handle`` to each other, so adding an op is a struct, its handler and the
method that asks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict

import msgspec

from ...clock import MAX_SKEW_MS
from ...core.discovery import DiscoveryScope
from ...core.routing import Origin
from ...runtime.load import MAX_CALLS, MAX_CONCURRENCY
from ...runtime.subscriptions import SUBSCRIBE_TTL_MS
from .framing import VERSION, FieldError, ProtocolError
from .op import (  # noqa: F401  (what an op is, and its bounds, seen from here)
    CALL_SLACK_S,
    EXIT_TIMEOUT_S,
    GREET_TIMEOUT_S,
    KEEP_BYTES,
    QUERY_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    Op,
    asks,
    decode,
    describe,
    name_of,
    registry,
)
from .specs import SPECS, RuntimeSpec
from .wire import WireEntry, WirePutResult

MAX_AWAIT_MS = 600_000  # the longest a runner may wait for publications in one request


# -- the host's own ops ---------------------------------------------------------------------

class HelloAnswer(TypedDict):
    pid: int
    version: int
    event_loop: str
    gc_thresholds: list[int]


class Hello(Op, tag="hello"):
    """Greet a host: the protocol it speaks, its pid, its loop, its collector's thresholds."""
    query = True
    result = HelloAnswer
    version: int

    def __post_init__(self) -> None:
        if self.version != VERSION:
            raise FieldError("version", f"{self.version}, this host speaks {VERSION}")

    def timeout_s(self) -> float:
        return GREET_TIMEOUT_S


class Exit(Op, tag="exit"):
    """Stop every runtime gracefully and end the host."""

    def timeout_s(self) -> float:
        return EXIT_TIMEOUT_S


class Advance(Op, tag="advance"):
    """Move the host's clock to the scenario's offset (its runtimes purge at once)."""
    query = True
    result = int
    offset_ms: int


class Profile(Op, tag="profile"):
    """Switch the host's cProfile on (None) or off (what it profiled)."""
    result = dict[str, Any] | None
    enable: bool


class WriteFailure(Op, tag="write_failure"):
    """The host's first write that failed (also carried by every answer from then on)."""
    query = True
    result = dict[str, str] | None

    def timeout_s(self) -> float:
        return QUERY_TIMEOUT_S  # asked of every host after each step: one that is busy is not waited for


# -- a runtime's lifecycle ------------------------------------------------------------------

class RuntimeOp(Op):
    runtime: str


class Started(TypedDict):
    ws_port: Annotated[int, msgspec.Meta(ge=0, le=65535)] | None


class Create(RuntimeOp, tag="create"):
    """Make a runtime from its spec (``specs``), not yet started."""
    kind: Literal["cluster-controller", "libjoynr"]
    spec: dict[str, Any]

    def __post_init__(self) -> None:
        self.runtime_spec()

    def runtime_spec(self) -> RuntimeSpec:
        try:
            return msgspec.convert(self.spec, SPECS[self.kind], strict=True)
        except msgspec.ValidationError as exc:
            path, detail = describe(exc)
            raise FieldError(f"spec.{path}" if path else "spec", detail) from None


class Start(RuntimeOp, tag="start"):
    result = Started
    restart: bool


class ClockSkew(RuntimeOp, tag="clock_skew"):
    """From now on the runtime reads the run's time ``ms`` off (``clock.RuntimeClock``)."""
    ms: Annotated[int, msgspec.Meta(ge=-MAX_SKEW_MS, le=MAX_SKEW_MS)]


class Stop(RuntimeOp, tag="stop"):
    """Graceful: the runtime unregisters what it registered and says goodbye."""


class Close(RuntimeOp, tag="close"):
    """The host forgets the runtime (its process goes on with the others)."""


# -- providers, proxies and calls ------------------------------------------------------------

ProxyIds = tuple[str, str]  # the proxy's participant id, its provider's


class RegisterProvider(RuntimeOp, tag="register_provider"):
    """A built-in provider (``participants.INTERFACES``), created in the host."""
    result = str
    domain: str
    interface: str
    participant_id: str | None
    scope: Literal["GLOBAL", "LOCAL"]  # joynr.types.ProviderScope
    gbids: list[str] | None
    priority: int


class UnregisterProvider(RuntimeOp, tag="unregister_provider"):
    participant_id: str


class InvokeProvider(RuntimeOp, tag="invoke_provider"):
    result = Any
    participant_id: str
    method: str
    params: list[Any]


class CreateProxy(RuntimeOp, tag="create_proxy"):
    result = ProxyIds
    interface: str
    provider: str
    visible: bool


class DiscoverProxy(RuntimeOp, tag="discover_proxy"):
    result = ProxyIds
    interface: str
    domain: str | None
    participant_id: str | None
    scope: DiscoveryScope
    gbids: list[str] | None
    cache_max_age_ms: int


class Request(RuntimeOp, tag="request"):
    """A request from a participant in the runtime; its reply's payload, or its error."""
    result = Any
    sender: str
    recipient: str
    method: str
    params: list[Any]
    ttl_ms: int
    gbid: str | None

    def timeout_s(self) -> float:
        return self.ttl_ms / 1000 + CALL_SLACK_S


class OneWay(RuntimeOp, tag="one_way"):
    """A one-way message, sent at once: its message id."""
    query = True
    result = str
    sender: str
    recipient: str
    method: str
    params: list[Any]
    ttl_ms: int


class LoadOutcome(TypedDict):
    ok: int
    failed: dict[str, int]  # error type -> calls
    seconds: float


class Load(RuntimeOp, tag="load"):
    """``calls`` requests driven inside the host, ``concurrency`` at a time."""
    result = LoadOutcome
    sender: str
    recipient: str
    method: str
    params: list[Any]
    ttl_ms: int
    calls: Annotated[int, msgspec.Meta(ge=1, le=MAX_CALLS)]
    concurrency: Annotated[int, msgspec.Meta(ge=1, le=MAX_CONCURRENCY)]

    def timeout_s(self) -> float:
        rounds = -(-self.calls // self.concurrency)
        return rounds * self.ttl_ms / 1000 + CALL_SLACK_S


# -- subscriptions --------------------------------------------------------------------------

class Published(TypedDict):
    values: list[Any]
    ended: str | None


class Subscribe(RuntimeOp, tag="subscribe"):
    """A proxy's subscription to an attribute or a broadcast. The payload's own rules are
    joynr's (``core.subscription_wire``): the host checks them before it sends anything."""
    result = str
    proxy: str
    name: str
    kind: str
    qos: dict[str, Any]
    filter: dict[str, Any] | None
    partitions: list[Any]

    def timeout_s(self) -> float:
        return SUBSCRIBE_TTL_MS / 1000 + CALL_SLACK_S


class Unsubscribe(RuntimeOp, tag="unsubscribe"):
    subscription_id: str


class AwaitPublications(RuntimeOp, tag="await_publications"):
    """The publications received, once there are ``count``; TimeoutError after ``timeout_ms``."""
    result = Published
    subscription_id: str
    count: Annotated[int, msgspec.Meta(ge=0)]
    timeout_ms: Annotated[int, msgspec.Meta(ge=0, le=MAX_AWAIT_MS)]

    def timeout_s(self) -> float:
        return self.timeout_ms / 1000 + CALL_SLACK_S


class Publications(RuntimeOp, tag="publications"):
    """The publications received so far (also after the subscription ended)."""
    query = True
    result = Published
    subscription_id: str


# -- the routing table ----------------------------------------------------------------------

class LookupRoute(RuntimeOp, tag="lookup_route"):
    query = True
    result = WireEntry | None
    participant_id: str
    gbid: str | None


class AddNextHop(RuntimeOp, tag="add_next_hop"):
    """Offer a route, as the runtime's own add_next_hop: what waited for it goes there."""
    query = True
    result = WirePutResult
    participant_id: str
    entry: WireEntry
    origin: Origin

    def __post_init__(self) -> None:
        if self.entry.in_process:
            raise FieldError("entry.address", "an InProcess address cannot be sent to a host")


class RemoveNextHop(RuntimeOp, tag="remove_next_hop"):
    query = True
    result = str
    participant_id: str


class Routes(RuntimeOp, tag="routes"):
    query = True
    result = list[tuple[str, WireEntry]]


class Queued(RuntimeOp, tag="queued"):
    query = True
    result = int
    participant_id: str | None


# -- a cluster controller ---------------------------------------------------------------------

class Connected(RuntimeOp, tag="connected"):
    """Whether its MQTT connection to ``gbid``'s broker is up."""
    query = True
    result = bool
    gbid: str


class Admit(RuntimeOp, tag="admit"):
    """Provision a libjoynr runtime ``client``: the token its WebSocket handshake must carry."""
    query = True
    result = str
    client: str
    token: str | None


class Cut(RuntimeOp, tag="cut"):
    """Cut the controller off ``gbid``'s broker (the link dies without DISCONNECT)."""
    gbid: str


class Heal(RuntimeOp, tag="heal"):
    gbid: str


OPS = registry(
    Hello, Exit, Advance, Profile, WriteFailure, Create, Start, ClockSkew, Stop, Close, RegisterProvider,
    UnregisterProvider, InvokeProvider, CreateProxy, DiscoverProxy, Request, OneWay, Load, Subscribe, Unsubscribe,
    AwaitPublications, Publications, LookupRoute, AddNextHop, RemoveNextHop, Routes, Queued, Connected, Admit, Cut,
    Heal,
)
QUERY_OPS = frozenset(name for name, op in OPS.items() if op.query)
# Methods of joynr_sim.runtime.handle asked as an op of another name, and those the host
# process carries out itself: a crash is a SIGKILL of it, a restart a new one.
ASKED_AS = {"call": "request", "subscribe_attribute": "subscribe", "subscribe_broadcast": "subscribe"}
BY_THE_PROCESS = frozenset({"crash", "restart"})


# -- decoding ---------------------------------------------------------------------------------

def validate_request(message: Mapping[str, Any], ops: Mapping[str, type[Op]] = OPS) -> tuple[int, str, Op]:
    """The id, the op's name and the op of a request, every argument checked."""
    extra = set(message) - {"v", "id", "op", "args"}
    if extra:
        raise ProtocolError(f"request: unknown fields {sorted(extra)}")
    name = message.get("op")
    return message["id"], name, decode(name, message.get("args"), ops)  # type: ignore[arg-type]
