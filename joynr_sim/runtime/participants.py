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

REQUEST_REPLY_ID = "requestReplyId"


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


class CounterProvider:
    interface_name = "joynrsim/Counter"

    def __init__(self) -> None:
        self.value = 0

    def increment(self) -> int:
        self.value += 1
        return self.value

    def get(self) -> int:
        return self.value


INTERFACES: dict[str, type] = {
    cls.interface_name: cls for cls in (EchoProvider, AddProvider, CounterProvider)
}
