"""What a run's manifest records of its surroundings: the installed versions, the broker as
given without its passwords, and what that broker kind is declared to keep."""

from __future__ import annotations

import functools
import platform
from importlib import metadata
from typing import Any

from brokers import BrokerSpecError, parse_broker, redact
from brokers.promises import declared


@functools.cache  # the installed versions do not change within a process; reading them costs 20 ms
def _installed_versions() -> tuple[tuple[str, str], ...]:
    out = {"python": platform.python_version()}
    for dist in ("joynr-sim", "paho-mqtt", "amqtt", "websockets", "msgpack"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return tuple(out.items())


def installed_versions() -> dict[str, str]:
    return dict(_installed_versions())


def redacted_broker(spec: str) -> str:
    try:
        return parse_broker(spec).redacted()
    except BrokerSpecError:
        return redact(spec)  # set-up will refuse it; record it without its passwords


def broker_properties(spec: str) -> dict[str, dict[str, Any]]:
    try:
        return declared(parse_broker(spec).kind)
    except BrokerSpecError:
        return {}  # set-up will refuse it
