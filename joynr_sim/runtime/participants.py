"""Providers and proxies: request/reply payloads, typed error replies, built-in interfaces.

A request payload is ``{"m": method, "p": [params]}``; a reply is ``{"r": result}`` or
``{"e": {"type": ..., "msg": ..., "err": ...}}``. The requestReplyId that pairs them
travels as the custom header ``requestReplyId`` so every hop can trace it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from ..core.errors import (  # noqa: F401  (re-exported: what a call can raise)
    ApplicationException,
    JoynrRuntimeException,
    JoynrTimeoutException,
    MethodInvocationException,
    ProviderRuntimeException,
)
from ..core.ids import new_hex

_ERRORS = {
    cls.__name__: cls
    for cls in (ProviderRuntimeException, MethodInvocationException, JoynrRuntimeException)
}


def encode_request(method: str, params: list[Any]) -> bytes:
    return msgpack.packb({"m": method, "p": params}, use_bin_type=True)


def decode_request(payload: bytes) -> tuple[str, list[Any]]:
    data = msgpack.unpackb(payload, raw=False)
    if not isinstance(data, dict) or not isinstance(data.get("m"), str):
        raise MethodInvocationException("malformed request payload")
    params = data.get("p", [])
    if not isinstance(params, list):
        raise MethodInvocationException("request params must be a list")
    return data["m"], params


def encode_reply(result: Any = None, error: BaseException | None = None) -> bytes:
    if error is None:
        return msgpack.packb({"r": result}, use_bin_type=True)
    err = {"type": type(error).__name__, "msg": str(error)}
    if isinstance(error, ApplicationException):
        err["type"], err["err"] = "ApplicationException", error.error
    return msgpack.packb({"e": err}, use_bin_type=True)


def decode_reply(payload: bytes) -> Any:
    """The result, or raise the typed error the provider answered with."""
    data = msgpack.unpackb(payload, raw=False)
    if not isinstance(data, dict):
        raise JoynrRuntimeException("malformed reply payload")
    if "e" in data:
        err = data["e"]
        if err.get("type") == "ApplicationException":
            raise ApplicationException(err.get("err", ""), err.get("msg", ""))
        raise _ERRORS.get(err.get("type"), JoynrRuntimeException)(err.get("msg", ""))
    return data.get("r")


@dataclass
class ProviderSkeleton:
    """The in-process end of a provider: what an InProcessAddress points at."""

    participant_id: str
    domain: str
    interface_name: str
    implementation: Any
    # Per method: inspect.signature costs more than a whole echo call's routing decision.
    _signatures: dict[str, tuple[Any, inspect.Signature]] = field(default_factory=dict, repr=False, compare=False)
    # What the trace calls its InProcess address: the same for this object only, and the
    # same in every run of a seed (an object's id() is where the allocator put it).
    address_key: str = field(default_factory=lambda: new_hex(8), repr=False, compare=False)

    async def invoke(self, method: str, params: list[Any]) -> Any:
        if method.startswith("_"):
            raise MethodInvocationException(f"no method {method!r} on {self.interface_name}")
        target: Callable[..., Any] | None = getattr(self.implementation, method, None)
        if not callable(target):
            raise MethodInvocationException(f"no method {method!r} on {self.interface_name}")
        cached = self._signatures.get(method)
        if cached is None or cached[0] != target:  # a method rebound since is looked at again
            cached = self._signatures[method] = (target, inspect.signature(target))
        try:
            cached[1].bind(*params)
        except TypeError as exc:
            raise MethodInvocationException(f"{method}: {exc}") from None
        result = target(*params)
        if inspect.isawaitable(result):
            result = await result
        return result


@dataclass
class ProxySkeleton:
    """The in-process end of a proxy: replies for it resolve its pending calls."""

    participant_id: str
    interface_name: str
    provider_participant_id: str
    # The trace's name of its InProcess address, as a provider skeleton's.
    address_key: str = field(default_factory=lambda: new_hex(8), repr=False, compare=False)


# -- the built-in interfaces scenarios use ------------------------------------------

class EchoProvider:
    interface_name = "joynrsim/Echo"

    def echo(self, text: str) -> str:
        return text


class AddProvider:
    interface_name = "joynrsim/Add"

    def add(self, a: int, b: int) -> int:
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (a, b)):
            raise ApplicationException("INVALID_ARGUMENT", f"add needs two numbers, got {a!r}, {b!r}")
        return a + b


class Notifier:
    """What a provider implementation tells its runtime: an attribute changed, a broadcast
    fired. An implementation that is registered nowhere has this silent one; registering
    it puts its runtime's in place (``joynr_sim.runtime.subscriptions``)."""

    def value_changed(self, attribute: str, value: Any) -> None:
        pass

    def fire_broadcast(self, broadcast: str, value: Any, partitions: tuple[str, ...] = ()) -> None:
        pass

    def fire_selective_broadcast(self, broadcast: str, value: Any) -> None:
        pass


class CounterProvider:
    """A counter: attribute ``value`` (on change), the non-selective broadcast
    ``incremented`` (a multicast) and the selective broadcast ``reachedMultiple``, whose
    subscribers give the filter parameter ``every`` (an integer from 1): it reaches them
    when the new value is a multiple of it."""

    interface_name = "joynrsim/Counter"
    ATTRIBUTES = ("value",)
    BROADCASTS = ("incremented",)
    SELECTIVE_BROADCASTS = ("reachedMultiple",)

    def __init__(self) -> None:
        self.value = 0
        self.notifier = Notifier()

    def increment(self) -> int:
        self.value += 1
        self.notifier.value_changed("value", self.value)
        self.notifier.fire_broadcast("incremented", self.value)
        self.notifier.fire_selective_broadcast("reachedMultiple", self.value)
        return self.value

    @staticmethod
    def _check_filter_reachedMultiple(params: dict[str, Any]) -> None:
        every = params.get("every")
        if set(params) != {"every"} or not isinstance(every, int) or isinstance(every, bool) or every < 1:
            raise ValueError(f"reachedMultiple filter: expected {{every: an integer from 1}}, got {params!r}")

    @staticmethod
    def _filter_reachedMultiple(value: Any, params: dict[str, Any]) -> bool:
        return isinstance(value, int) and value % params["every"] == 0

    def get(self) -> int:
        return self.value


INTERFACES: dict[str, type] = {
    cls.interface_name: cls for cls in (EchoProvider, AddProvider, CounterProvider)
}


# -- what an interface declares: attributes, broadcasts, filters ----------------------

def broadcast_kind(interface_name: str, broadcast: str, filter: dict[str, Any] | None) -> str:
    """``broadcast`` (selective: request and publications) or ``multicast``: as the
    interface declares it; for an unknown interface, a filter makes it selective."""
    cls = INTERFACES.get(interface_name)
    if cls is not None and broadcast in getattr(cls, "SELECTIVE_BROADCASTS", ()):
        return "broadcast"
    if cls is not None and broadcast in getattr(cls, "BROADCASTS", ()):
        return "multicast"
    return "broadcast" if filter is not None else "multicast"


def offers(implementation: Any, name: str, kind: str) -> bool:
    """Whether a provider has that attribute or broadcast (its declared lists)."""
    declared = {"attribute": "ATTRIBUTES", "broadcast": "SELECTIVE_BROADCASTS", "multicast": "BROADCASTS"}[kind]
    return name in getattr(implementation, declared, ())


def filter_error(implementation: Any, name: str, flt: dict[str, Any] | None) -> str | None:
    """Why a selective broadcast's filter parameters are refused, or None."""
    check = getattr(implementation, f"_check_filter_{name}", None)
    if check is None or not flt:
        return None  # no filter: every broadcast reaches the subscriber
    try:
        check(flt)
    except ValueError as exc:
        return str(exc)
    return None


def passes(implementation: Any, name: str, flt: dict[str, Any] | None, value: Any) -> bool:
    """Whether a selective broadcast reaches a subscriber: the provider's filter decides."""
    accept = getattr(implementation, f"_filter_{name}", None)
    if not flt or accept is None:
        return True
    return bool(accept(value, flt))
