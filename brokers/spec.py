"""The one parser of a broker choice: ``--broker`` on the command line, ``broker:`` in a
scenario and ``BrokerSet(broker=...)`` all go through ``parse_broker``.

    amqtt                                   embedded amqtt, one process per GBID (default)
    mosquitto                               the mosquitto binary, one process per GBID
    gbid1=mqtt://[user:pw@]host:port,...    external brokers, nothing is started

A bad value raises ``BrokerSpecError`` (a ValueError) whose message is one line naming the
value; a password never appears in it, nor in ``BrokerSpec.redacted()``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

KINDS = ("amqtt", "mosquitto")
EXTERNAL = "external"
GBID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")  # also names files in the run dir
MAX_SPEC_LENGTH = 4096
SECRET = "***"


class BrokerSpecError(ValueError):
    """A broker choice that cannot be used; the message names the offending part."""


@dataclass(frozen=True)
class ExternalBroker:
    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    def url(self, *, secret: bool = False) -> str:
        """``mqtt://[user[:***]@]host:port``; the password only when ``secret`` is asked for."""
        auth = ""
        if self.username is not None:
            auth = self.username
            if self.password is not None:
                auth += ":" + (self.password if secret else SECRET)
            auth += "@"
        return f"mqtt://{auth}{self.host}:{self.port}"


@dataclass(frozen=True)
class BrokerSpec:
    kind: str  # amqtt | mosquitto | external
    external: dict[str, ExternalBroker] = field(default_factory=dict)

    def redacted(self) -> str:
        """The choice as a user would type it, with every password shown as ``***``."""
        if self.kind != EXTERNAL:
            return self.kind
        return ",".join(f"{gbid}={b.url()}" for gbid, b in self.external.items())


_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\n]*@")  # a password may hold spaces


def redact(text: str) -> str:
    """``text`` with the password of every ``scheme://user:password@`` in it shown as ``***``."""
    return _URL_PASSWORD.sub(r"\1" + SECRET + "@", text)


def _safe(text: str) -> str:
    """A fragment of user input for an error message: one line, passwords masked, short."""
    text = redact(text)
    text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= 120 else text[:117] + "..."


def parse_broker(spec: object, gbids: Iterable[str] | None = None) -> BrokerSpec:
    """Parse a broker choice; with ``gbids``, external URLs must name exactly those GBIDs."""
    if not isinstance(spec, str):
        raise BrokerSpecError(f"broker: expected a string, got {type(spec).__name__}")
    if len(spec) > MAX_SPEC_LENGTH:
        raise BrokerSpecError(f"broker: value of {len(spec)} characters is too long (at most {MAX_SPEC_LENGTH})")
    text = spec.strip()
    if text in KINDS:
        return BrokerSpec(text)
    if "=" not in text:
        raise BrokerSpecError(
            f"broker: expected 'amqtt', 'mosquitto' or 'gbid=mqtt://host:port,...', got {_safe(spec)!r}"
        )
    external: dict[str, ExternalBroker] = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise BrokerSpecError(f"broker: empty entry in external broker list {_safe(spec)!r}")
        gbid, sep, url = part.partition("=")
        gbid, url = gbid.strip(), url.strip()
        if not sep or not gbid or not url:
            raise BrokerSpecError(f"broker: expected 'gbid=mqtt://host:port', got {_safe(part)!r}")
        if not GBID_RE.match(gbid):
            raise BrokerSpecError(f"broker: bad GBID {_safe(gbid)!r} (letters, digits, '.', '_', '-')")
        if gbid in external:
            raise BrokerSpecError(f"broker: GBID {gbid!r} given twice")
        try:
            split = urlsplit(url)
            port = split.port or 1883
        except ValueError:
            raise BrokerSpecError(f"broker: bad URL {_safe(url)!r} for GBID {gbid!r}") from None
        if split.scheme not in ("mqtt", "tcp"):
            raise BrokerSpecError(f"broker: URL {_safe(url)!r} for GBID {gbid!r} must start with mqtt:// (or tcp://)")
        if not split.hostname:
            raise BrokerSpecError(f"broker: no host in URL {_safe(url)!r} for GBID {gbid!r}")
        if split.path not in ("", "/") or split.query or split.fragment:
            raise BrokerSpecError(f"broker: URL {_safe(url)!r} for GBID {gbid!r} may only have a host and a port")
        external[gbid] = ExternalBroker(
            split.hostname, port,
            unquote(split.username) if split.username is not None else None,
            unquote(split.password) if split.password is not None else None,
        )
    if gbids is not None:
        wanted = list(gbids)
        missing = [g for g in wanted if g not in external]
        if missing:
            raise BrokerSpecError(f"broker: no URL for backend(s) {', '.join(missing)}")
        extra = [g for g in external if g not in wanted]
        if extra:
            raise BrokerSpecError(
                f"broker: URL for GBID(s) {', '.join(extra)} that are not backends ({', '.join(wanted)})"
            )
    return BrokerSpec(EXTERNAL, external)
