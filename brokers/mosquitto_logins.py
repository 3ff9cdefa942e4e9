"""The logins the Mosquitto brokers of a set let in: ``Accounts``, and the dynamic security
plugin's config that holds them.

Logins: the dynamic security plugin, not ``use_username_as_clientid`` and a password file
----------------------------------------------------------------------------------------
The option ``use_username_as_clientid`` made a client's session the one of its username,
so nobody could take over another's session. In Mosquitto 2.0.11 it let anybody, without
any password, cut a client off for good. Its check of a CONNECT without a username refuses
it after the broker has given the connection the CONNECT's client id; freeing the refused
connection then removes "the client with that id" from the broker's table of clients by
id, and that is the connected client with the same id, which stays connected and
subscribed but unknown by id (2.0.x later frees the id before refusing, and removes only
the connection itself; a refused password was already harmless). From then on:

- the next reload (SIGHUP, which the broker set sent for every client id first seen)
  frees the ACLs and binds the new ones only to the clients in that table: the orphan keeps
  its pointer into freed memory, and the next delivery to it crashed the broker (SIGSEGV
  in 3 of 3 tries) or was refused, so calls to that controller timed out;
- even without a reload, the client's next connect finds no session (session present 0)
  while the orphan keeps the subscription, and a SUBSCRIBE is matched to an existing
  subscription by client id: the orphan's is updated, the new connection gets nothing until
  the broker restarts. A restart of the controller does not help.

The dynamic security plugin binds a login to its client id instead (its ``clientid``): a
CONNECT under another's client id, or without a username, is refused in the password check,
which frees the client id before it refuses, so no refused CONNECT touches a session. The
broker set adds logins to running brokers over the plugin's control topic
(``$CONTROL/dynamic-security/v1``, a login of its own that nobody else has;
``brokers.mosquitto_control``), answered within milliseconds and without a reload, so a new
login no longer re-checks every connected client either. The ACL file
(``brokers.mosquitto_config``) holds patterns (``%u``: the username), so it is written once
and never changes: the same grants for every client, the administrative login's own. The
plugin decides nothing about topics: its default access is "no opinion" and the ACL file
decides.

Separate from the control topic's client (``brokers.mosquitto_control``): this module
decides who is let in and writes it for a broker that starts; that one only carries the
additions to a broker that runs.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import access
from .mosquitto_config import acl_text

# The broker set's own login that adds the others; only it may use the control topics.
LOGINS_USERNAME = access.RESERVED_PREFIX + "logins"
CONTROL_TOPIC = "$CONTROL/dynamic-security/v1"
RESPONSE_TOPIC = CONTROL_TOPIC + "/response"
# The plugin's own hash: PBKDF2-SHA512 with a 12-byte salt and this many iterations (what
# it uses for the logins it is sent). It hashes a password once per CONNECT: no reload
# hashes every connected client's again. These passwords are 128-bit HMAC outputs
# (brokers.access), so the iterations guard nothing that needs more.
_PBKDF2_ITERATIONS = 101
_SALT_BYTES = 12


def client_entry(username: str, password: str, *, bound: bool = True, salt: bytes | None = None) -> dict[str, Any]:
    """One client of the plugin's config, with the plugin's own password hash; ``bound``:
    it may log in only with its username as its client id."""
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, _PBKDF2_ITERATIONS, 64)
    entry: dict[str, Any] = {"username": username}
    if bound:
        entry["clientid"] = username
    b64 = base64.b64encode
    entry.update(password=b64(digest).decode(), salt=b64(salt).decode(), iterations=_PBKDF2_ITERATIONS)
    return entry


def _replace(path: Path, text: str) -> None:
    """Write the whole file at once, readable by its owner only: a start never sees half."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class Accounts:
    """The logins the Mosquitto brokers of a set let in: the set's own (administrative,
    probe, the one that adds logins) and every client id added so far, in order.

    Each addition counts a new ``generation``. A broker that starts reads them all from
    its plugin config (``write``); one that runs is sent those added after the generation
    it has (``since``, ``commands``). Passwords derive from the set's secret
    (``brokers.access``) when needed and are never kept. Not thread-safe: the broker set
    holds a lock.
    """

    def __init__(self, directory: Path, secret: str) -> None:
        self.directory = directory
        self.acl_path = directory / "mosquitto.acl"
        self._secret = secret
        self._order: list[str] = []  # client ids in the order added: generation n is _order[n - 1]
        self._added: dict[str, int] = {}  # client id -> its generation

    @property
    def generation(self) -> int:
        return len(self._order)

    def add(self, username: str) -> int:
        """Add ``username`` (a checked client id); the generation from which it is in."""
        if username not in self._added:
            self._order.append(username)
            self._added[username] = len(self._order)
        return self._added[username]

    def since(self, generation: int) -> list[str]:
        """The client ids added after ``generation``, in order."""
        return self._order[generation:]

    def logins_login(self) -> tuple[str, str]:
        return LOGINS_USERNAME, access.password(self._secret, LOGINS_USERNAME)

    def config_path(self, gbid: str) -> Path:
        return self.directory / f"{gbid}.dynsec.json"

    def write(self, gbid: str) -> int:
        """The plugin config of ``gbid``'s broker, with every login so far, and the ACL
        file; the generation written. For a broker that is not running: a running one
        writes its plugin config itself."""
        secret = self._secret
        clients = [
            # The administrative login may use any client id (and so take over any session).
            client_entry(access.ADMIN_USERNAME, access.password(secret, access.ADMIN_USERNAME), bound=False),
            client_entry(access.PROBE_USERNAME, access.password(secret, access.PROBE_USERNAME)),
            {**client_entry(LOGINS_USERNAME, access.password(secret, LOGINS_USERNAME)),
             "roles": [{"rolename": LOGINS_USERNAME}]},
        ]
        clients += [client_entry(u, access.password(secret, u)) for u in self._order]
        control = [("publishClientSend", CONTROL_TOPIC), ("publishClientReceive", RESPONSE_TOPIC),
                   ("subscribeLiteral", RESPONSE_TOPIC)]
        config = {
            # No opinion on topics (false defers to the ACL file), except the control topic.
            "defaultACLAccess": {"publishClientSend": False, "publishClientReceive": False,
                                 "subscribe": False, "unsubscribe": False},
            "clients": clients,
            "groups": [],
            "roles": [{"rolename": LOGINS_USERNAME,
                       "acls": [{"acltype": t, "topic": topic, "allow": True} for t, topic in control]}],
        }
        _replace(self.config_path(gbid), json.dumps(config, indent=1) + "\n")
        _replace(self.acl_path, acl_text())
        return self.generation

    def commands(self, usernames: Iterable[str]) -> list[dict[str, Any]]:
        """The plugin's commands that add these logins (with their passwords: send, never keep)."""
        return [{"command": "createClient", "username": u, "clientid": u, "password": access.password(self._secret, u)}
                for u in usernames]
