"""joynr's exceptions: what a call can end with, on either side of the wire."""

from __future__ import annotations


class JoynrRuntimeException(Exception):
    """Base of the errors a call can end with."""


class JoynrTimeoutException(JoynrRuntimeException):
    """No reply before the request expired."""


class ProviderRuntimeException(JoynrRuntimeException):
    """A provider's generic failure (the old GCD methods have no modeled errors)."""


class MethodInvocationException(JoynrRuntimeException):
    """The provider has no such method, or the arguments do not fit it."""


class ApplicationException(JoynrRuntimeException):
    """A modeled error: ``error`` is the enum value's name."""

    def __init__(self, error: str, message: str = "") -> None:
        super().__init__(message or error)
        self.error = error


class DiscoveryException(JoynrRuntimeException):
    """A lookup found no provider (joynr's DiscoveryException)."""


class SubscriptionException(JoynrRuntimeException):
    """The provider refused a subscription, or it could not be set up."""
