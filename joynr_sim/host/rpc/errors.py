"""Errors across the control protocol: they travel by type name (``failure``) and come back
as the same joynr exception types (``raise_remote``), so a caller cannot tell a runtime in a
host process from one in its own process; and the end of a host process while something
waited on it (``HostGone``)."""

from __future__ import annotations

from typing import Any, NoReturn

from ...core.discovery import DiscoveryError, DiscoveryErrorException
from ...core.errors import (
    ApplicationException,
    DiscoveryException,
    JoynrRuntimeException,
    JoynrTimeoutException,
    MethodInvocationException,
    ProviderRuntimeException,
    SubscriptionException,
)
from .framing import VERSION, ProtocolError

# What a call pending when its host ended fails with: the words a runtime in the runner's
# process uses for its pending calls when it goes down.
RUNTIME_WENT_DOWN = "runtime went down"


class HostGone(JoynrTimeoutException):
    """The host process ended (killed, or it exited) while something waited on it; to a
    caller it is what a crashed runtime's pending call is: a timeout."""


class RemoteError(RuntimeError):
    """An error in a host process that has no counterpart here; its type name is kept."""

    def __init__(self, type_name_: str, message: str) -> None:
        super().__init__(f"{type_name_}: {message}")
        self.type_name = type_name_


def failure(msg_id: int, exc: BaseException) -> dict[str, Any]:
    error = getattr(exc, "error", None)
    if isinstance(error, DiscoveryError):
        error = error.value
    detail = getattr(exc, "detail", None) if isinstance(exc, DiscoveryErrorException) else None
    if detail is not None:
        message = detail
    elif isinstance(exc, KeyError) and exc.args:
        message = exc.args[0]  # str() of a KeyError quotes it
    else:
        message = str(exc)
    return {"v": VERSION, "id": msg_id, "ok": False, "error": {
        "type": getattr(exc, "type_name", type(exc).__name__), "message": str(message),
        "error": error if isinstance(error, str) else None,
    }}


_ERRORS: dict[str, type[BaseException]] = {cls.__name__: cls for cls in (
    JoynrRuntimeException, JoynrTimeoutException, MethodInvocationException, ProviderRuntimeException,
    ValueError, KeyError, RuntimeError, TypeError, ProtocolError, TimeoutError, SubscriptionException,
    DiscoveryException,
)}


def raise_remote(error: dict[str, Any]) -> NoReturn:
    """Raise what the host process raised, as the same type where joynr-sim knows it."""
    name, message, code = error["type"], error["message"], error["error"]
    if name == "DiscoveryErrorException" and code is not None:
        try:
            raise DiscoveryErrorException(DiscoveryError(code), message)
        except ValueError:
            pass
    if name == "ApplicationException" and code is not None:
        raise ApplicationException(code, message)
    cls = _ERRORS.get(name)
    if cls is None:
        raise RemoteError(name, message)
    raise cls(message)
