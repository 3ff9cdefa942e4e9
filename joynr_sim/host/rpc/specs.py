"""What a runtime in a host is made from: the ``create`` op's spec, one struct per kind,
checked field by field as it is decoded.

The broker endpoints and credentials it connects with (resolved by the runner, so the fault
proxies and passwords stay the runner's), the tokens of the libjoynr runtimes its cluster
controller admits, the WebSocket address it listened on before (a restarted cluster
controller listens where its libjoynr runtimes expect it), and constructor options by name,
scalars only.
"""

from __future__ import annotations

import inspect
import ipaddress
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar

import msgspec

from ...core.address import Address, AddressError, WebSocketAddress, from_dict
from ...runtime.cluster_controller import ClusterController
from ...runtime.libjoynr import LibjoynrRuntime
from .framing import FieldError

KINDS: dict[str, type] = {"cluster-controller": ClusterController, "libjoynr": LibjoynrRuntime}
# Set by the host from the spec, never by an option.
_RESERVED = {"self", "cc_id", "gbids", "brokers", "runtime_id", "provisioned", "link_registry", "cc_address",
             "token", "run_dir", "run_id", "clock", "policy", "max_hops", "seed", "incarnation", "kwargs",
             "node", "directory", "ws_host", "ws_port", "ws_tokens"}
Scalar = bool | int | float | str | None
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
ListenPort = Annotated[int, msgspec.Meta(ge=0, le=65535)]  # 0: any free port


def check_options(kind: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor options of a runtime of ``kind``, by name; each a scalar."""
    if kind not in KINDS:
        raise FieldError("kind", f"expected one of {sorted(KINDS)}, got {kind!r}")
    cls = KINDS[kind]
    accepted = {name for klass in cls.__mro__ if "__init__" in vars(klass) and klass is not object
                for name in inspect.signature(klass.__init__).parameters}
    for name, value in options.items():
        if name in _RESERVED or name not in accepted:
            raise FieldError("options", f"{cls.__name__} has no option {name!r}")
        if not isinstance(value, Scalar):
            raise FieldError(f"options.{name}", f"expected a scalar, got {type(value).__name__}")
    return dict(options)


def check_ip(field: str, value: str) -> str:
    """An IP address to listen on (a host joined from another machine listens on its own)."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise FieldError(field, f"expected an IP address, got {value[:64]!r}") from None


def _address(field: str, data: Any) -> Address:
    try:
        return from_dict(data)
    except AddressError as exc:
        raise FieldError(field, str(exc)) from None


class RuntimeSpec(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    kind: ClassVar[str]
    run_dir: str
    run_id: str
    policy: str
    max_hops: int
    seed: int | None
    incarnation: int
    options: dict[str, Scalar]

    def __post_init__(self) -> None:
        check_options(self.kind, self.options)

    def common(self) -> dict[str, Any]:
        """The constructor arguments every kind takes from its spec."""
        return dict(run_id=self.run_id, policy=self.policy, max_hops=self.max_hops, seed=self.seed,
                    incarnation=self.incarnation)


class Broker(msgspec.Struct, forbid_unknown_fields=True):
    host: str
    port: Port
    username: str | None
    password: str | None


class ClusterControllerSpec(RuntimeSpec):
    kind = "cluster-controller"
    cc_id: str
    gbids: list[str]
    brokers: dict[str, Broker]
    provisioned: list[tuple[str, dict[str, Any], bool]]  # participant id, address, visible
    ws_host: str
    ws_port: ListenPort
    tokens: dict[str, str]  # libjoynr runtime id -> the token it proves its id with

    def __post_init__(self) -> None:
        super().__post_init__()
        if set(self.brokers) != set(self.gbids):
            raise FieldError("brokers", f"GBIDs {sorted(self.brokers)} differ from {self.gbids}")
        check_ip("ws_host", self.ws_host)
        self.provisioned_routes()

    def provisioned_routes(self) -> list[tuple[str, Address, bool]]:
        return [(pid, _address(f"provisioned[{i}]", address), visible)
                for i, (pid, address, visible) in enumerate(self.provisioned)]

    def broker_directory(self) -> StaticBrokers:
        return StaticBrokers(self.brokers)


class LibjoynrSpec(RuntimeSpec):
    kind = "libjoynr"
    cc_id: str
    cc_address: dict[str, Any]
    token: str | None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.websocket_address()

    def websocket_address(self) -> WebSocketAddress:
        address = _address("cc_address", self.cc_address)
        if not isinstance(address, WebSocketAddress):
            raise FieldError("cc_address", "expected a WebSocketAddress")
        return address


SPECS: dict[str, type[RuntimeSpec]] = {spec.kind: spec for spec in (ClusterControllerSpec, LibjoynrSpec)}


class StaticBrokers:
    """The broker directory of a runtime in a host: endpoints and credentials as the runner
    resolved them when it started the process."""

    def __init__(self, brokers: Mapping[str, Broker]) -> None:
        self._brokers = dict(brokers)

    def endpoint(self, gbid: str) -> tuple[str, int]:
        try:
            b = self._brokers[gbid]
        except KeyError:
            raise ValueError(f"gbid: {gbid!r} is not one of this runtime's GBIDs {list(self._brokers)}") from None
        return b.host, b.port

    def credentials(self, client_id: str, gbid: str | None = None) -> tuple[str, str] | None:
        b = self._brokers.get(gbid or next(iter(self._brokers), ""))
        if b is None or b.username is None:
            return None
        return b.username, b.password  # type: ignore[return-value]  # as the runner resolved them
