"""Mosquitto as one GBID's broker: finding it, its config, and the logins it lets in.

Every broker of a set gets its own generated config ``<run dir>/brokers/<gbid>.conf`` and
persistence directory ``<run dir>/brokers/<gbid>.mosquitto/``:

- one listener on the loopback interface and the port the broker set chose;
- anonymous access off; logins through Mosquitto's dynamic security plugin (its config
  ``<gbid>.dynsec.json``): every client logs in as itself, its username bound to its client
  id, with its own password; topics through the ACL file ``mosquitto.acl``, patterns of the
  grants of ``brokers.access`` that never change (see "Logins" below);
- ``max_queued_messages 0``: the default of 1000 silently drops QoS 1 messages to a
  connected but slow subscriber;
- persistence on, saved after every ``autosave`` counted changes (``autosave_on_changes``;
  default ``AUTOSAVE_CHANGES`` = 1, every change) and on a clean stop: a restart after a
  clean stop keeps persistent sessions, subscriptions and queued messages; after a SIGKILL
  it keeps what the last autosave held. Mosquitto 2.0 counts as a change: a persistent
  session's connect, a SUBSCRIBE, an UNSUBSCRIBE, a subscriber's PUBACK of a QoS 1 message
  (two per joynr request/reply), a retained message. With an interval of 1 the last save
  holds everything acknowledged before the broker's last loop pass; with N it can miss the
  last N-1 changes and whatever came with them, with no time bound (there is no timed save
  next to the counted one).

Saving writes the whole database (every session) and fsyncs it, on Mosquitto's only
thread: measured on 2 busy cores with a persistent QoS 1 subscriber, about 0.4-1k msg/s at
interval 1, 3.3k at 10, 4.5k at 100; with the 100-controller fleet connected, 0.28-0.34 ms
of broker CPU per request/reply at 1 against 0.05 ms at 1000. Crash fidelity matters more
than speed for scenarios, which keep 1; a fleet run may choose more.

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
(``$CONTROL/dynamic-security/v1``, a login of its own that nobody else has), answered
within milliseconds and without a reload, so a new login no longer re-checks every
connected client either. The ACL file holds patterns (``%u``: the username), so it is
written once and never changes: the same grants for every client, the administrative
login's own. The plugin decides nothing about topics: its default access is "no opinion"
and the ACL file decides.

The price: the plugin writes its whole config after every command, so adding n logins to a
running broker that has N costs time in n x N. Measured through the broker set on this
2-core machine (two brokers, load about 3): one login at 1,000 took 12-29 ms (25-30 ms with
a reload, which also grows with the clients connected); admitting 1,000 to running brokers
took 3.5-4 s (29-185 ms with one reload), 100 took 0.1 s (5 ms). Logins admitted before the
brokers start cost none of that: a broker reads them all from its plugin config (1,000 made
the start of two brokers 0.13 s longer). Logins are sent in chunks of ``CHUNK_LOGINS``, so
a broker serves its clients in between.

Longer than 400 lines because it is all that is Mosquitto's own in a broker set: its
config, its logins, and the small MQTT client that sends logins to the plugin of a running
broker; they change together, and the broker set is their only user.
"""

from __future__ import annotations

import base64
import glob
import hashlib
import json
import os
import pwd
import secrets
import shutil
import socket
import struct
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from . import access
from .probe import CONNACK_CODES, connect_packet

AUTOSAVE_CHANGES = 1
MAX_AUTOSAVE_CHANGES = 1_000_000
SYSTEM_BINARY = Path("/usr/sbin/mosquitto")
DYNSEC_PLUGIN = "mosquitto_dynamic_security.so"
# Where Mosquitto 2.0 packages put the plugin (Debian: the multiarch directory).
_PLUGIN_GLOBS = ("/usr/lib/*/" + DYNSEC_PLUGIN, "/usr/lib/" + DYNSEC_PLUGIN,
                 "/usr/lib64/" + DYNSEC_PLUGIN, "/usr/local/lib/" + DYNSEC_PLUGIN,
                 "/usr/local/lib/*/" + DYNSEC_PLUGIN)

# The broker set's own login that adds the others; only it may use the control topics.
LOGINS_USERNAME = access.RESERVED_PREFIX + "logins"
CONTROL_TOPIC = "$CONTROL/dynamic-security/v1"
RESPONSE_TOPIC = CONTROL_TOPIC + "/response"
CONTROL_TIMEOUT_S = 10.0  # per chunk; a chunk of 100 logins at 2,000 takes about 0.5 s
CHUNK_LOGINS = 100
# The plugin's own hash: PBKDF2-SHA512 with a 12-byte salt and this many iterations (what
# it uses for the logins it is sent). It hashes a password once per CONNECT: no reload
# hashes every connected client's again. These passwords are 128-bit HMAC outputs
# (brokers.access), so the iterations guard nothing that needs more.
_PBKDF2_ITERATIONS = 101
_SALT_BYTES = 12
_ALREADY = "Client already exists"


class MosquittoNotFound(RuntimeError):
    pass


class ControlError(RuntimeError):
    """A broker did not take the logins sent to it; the message says why, without passwords."""


def find_binary() -> str:
    """The Mosquitto executable: /usr/sbin/mosquitto (Debian puts it off PATH), else PATH."""
    if SYSTEM_BINARY.is_file() and os.access(SYSTEM_BINARY, os.X_OK):
        return str(SYSTEM_BINARY)
    found = shutil.which("mosquitto")
    if found:
        return found
    raise MosquittoNotFound(
        "broker='mosquitto': no Mosquitto executable found "
        f"(looked for {SYSTEM_BINARY} and 'mosquitto' on PATH); install it "
        "(e.g. apt-get install mosquitto) or use broker='amqtt'"
    )


def find_plugin(binary: str) -> str:
    """Mosquitto 2.0's dynamic security plugin, next to the binary's prefix or in a system
    library directory."""
    prefix = Path(binary).resolve().parent.parent
    patterns = (str(prefix / "lib" / DYNSEC_PLUGIN), str(prefix / "lib" / "*" / DYNSEC_PLUGIN), *_PLUGIN_GLOBS)
    for pattern in patterns:
        for found in sorted(glob.glob(pattern)):
            if os.path.isfile(found):
                return found
    raise MosquittoNotFound(
        f"broker='mosquitto': Mosquitto's dynamic security plugin ({DYNSEC_PLUGIN}, part of "
        f"Mosquitto 2.0) was not found (looked for {', '.join(patterns)}); joynr-sim lets its "
        "clients in through it. Install Mosquitto 2.0 or use broker='amqtt'"
    )


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


def acl_section(username: str) -> str:
    """The ACL file's lines for one user: its grants from ``brokers.access``.

    Mosquitto 2.0.11 checks these when it delivers and when it accepts a PUBLISH (or sends
    a will), not at SUBSCRIBE: a SUBACK grants any filter, and the messages outside the
    grants never arrive."""
    lines = [f"user {username}"]
    lines += [f"topic {g.access} {g.topic_filter}" for g in access.grants(username)]
    return "\n".join(lines) + "\n"


def acl_text() -> str:
    """The whole ACL file: every client's grants as patterns (``%u``, the username, stands
    for its own prefix), then the administrative login's own grants. Mosquitto warns at
    start that the patterns shared by all hold neither ``%u`` nor ``%c``: they are meant so."""
    patterns = [f"pattern {g.access} {g.topic_filter}" for g in access.grants("%u")]
    return ("# Generated by joynr-sim's broker set from brokers.access; the same for every run.\n"
            + "\n".join(patterns) + "\n" + acl_section(access.ADMIN_USERNAME))


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


# -- the control topic: adding logins to a running broker ---------------------------------


def _string(value: str) -> bytes:
    raw = value.encode()
    return struct.pack("!H", len(raw)) + raw


def _packet(first: int, body: bytes) -> bytes:
    length, encoded = len(body), bytearray()
    while True:
        byte, length = length % 128, length // 128
        encoded.append(byte | (0x80 if length else 0))
        if not length:
            break
    return bytes([first]) + bytes(encoded) + body


class _Reader:
    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline, self.buffer = sock, deadline, b""

    def _more(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        self.sock.settimeout(left)
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionResetError("the broker closed the connection")
        self.buffer += chunk

    def packet(self) -> tuple[int, bytes]:
        """(the fixed header's first byte, the body) of the next packet."""
        while True:
            length, multiplier, i = 0, 1, 1
            while i < len(self.buffer) and i <= 4:
                byte = self.buffer[i]
                length += (byte & 0x7F) * multiplier
                multiplier *= 128
                i += 1
                if not byte & 0x80:
                    if len(self.buffer) >= i + length:
                        first, body = self.buffer[0], self.buffer[i:i + length]
                        self.buffer = self.buffer[i + length:]
                        return first, body
                    break
            self._more()


def send_logins(host: str, port: int, login: tuple[str, str], commands: list[dict[str, Any]],
                timeout_s: float = CONTROL_TIMEOUT_S) -> None:
    """Send ``commands`` (``Accounts.commands``) to the plugin of the broker at host:port,
    ``CHUNK_LOGINS`` at a time, each answered before the next; raises ControlError naming
    the first login a broker refused (a login it already has is no refusal), OSError or
    TimeoutError when it cannot be reached or does not answer within ``timeout_s`` a chunk."""
    username, password = login
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = _Reader(sock, time.monotonic() + timeout_s)
        sock.sendall(connect_packet(username, username, password))
        first, body = reader.packet()
        if first != 0x20 or len(body) < 2:
            raise ControlError(f"the broker answered the CONNECT of {LOGINS_USERNAME} with packet 0x{first:02x}")
        if body[1] != 0:
            raise ControlError(f"the broker refused the broker set's own login ({LOGINS_USERNAME}): CONNACK "
                               f"{body[1]} ({CONNACK_CODES.get(body[1], 'unknown')})")
        sock.sendall(_packet(0x82, struct.pack("!H", 1) + _string(RESPONSE_TOPIC) + b"\x00"))
        first, body = reader.packet()
        if first != 0x90 or body[2:3] == b"\x80":
            raise ControlError(f"the broker refused the broker set's subscription to {RESPONSE_TOPIC}")
        for start in range(0, len(commands), CHUNK_LOGINS):
            reader.deadline = time.monotonic() + timeout_s
            _request(sock, reader, commands[start:start + CHUNK_LOGINS])
        sock.sendall(b"\xe0\x00")  # DISCONNECT


def _request(sock: socket.socket, reader: _Reader, chunk: list[dict[str, Any]]) -> None:
    token = secrets.token_hex(8)
    tagged = [{**c, "correlationData": f"{token}-{i}"} for i, c in enumerate(chunk)]
    sock.sendall(_packet(0x30, _string(CONTROL_TOPIC) + json.dumps({"commands": tagged}).encode()))
    while True:
        first, body = reader.packet()
        if first >> 4 != 3:  # not a PUBLISH: nothing else is asked for here
            continue
        topic_length = struct.unpack("!H", body[:2])[0]
        topic = body[2:2 + topic_length].decode(errors="replace")
        offset = 2 + topic_length + (2 if first & 0x06 else 0)
        if topic != RESPONSE_TOPIC:
            continue
        try:
            responses = json.loads(body[offset:])["responses"]
        except (ValueError, KeyError, TypeError):
            raise ControlError("the broker answered the broker set's logins with something else "
                               "than the plugin's responses") from None
        ours = {r.get("correlationData"): r for r in responses if isinstance(r, dict)}
        if not any(isinstance(k, str) and k.startswith(token) for k in ours):
            continue  # another request's answer
        for i, command in enumerate(chunk):
            answer = ours.get(f"{token}-{i}")
            if answer is None:
                raise ControlError(f"the broker did not answer for login {command['username']!r}")
            error = answer.get("error")
            if error and error != _ALREADY:
                raise ControlError(f"the broker refused login {command['username']!r}: {error}")
        return


def check_autosave(autosave: object) -> int:
    """``autosave``: counted changes between saves, an int from 1 to ``MAX_AUTOSAVE_CHANGES``."""
    if type(autosave) is not int or not 1 <= autosave <= MAX_AUTOSAVE_CHANGES:
        raise ValueError(f"autosave: expected the number of changes between Mosquitto's saves, "
                         f"1 to {MAX_AUTOSAVE_CHANGES:,}, got {autosave!r}")
    return autosave


def config_text(port: int, plugin: str, plugin_config: Path, acl_file: Path, persistence_dir: Path,
                autosave: int = AUTOSAVE_CHANGES) -> str:
    check_autosave(autosave)
    for name, value in (("plugin", plugin), ("plugin config", plugin_config), ("acl_file", acl_file),
                        ("persistence_dir", persistence_dir)):
        if "\n" in str(value) or "\r" in str(value):
            raise ValueError(f"{name}: a path with a line break cannot go into a Mosquitto config: {str(value)!r}")
    # Running as root, Mosquitto would drop to user "mosquitto", which cannot write to the
    # run directory; naming the current user keeps it (the option is ignored if not root).
    user = pwd.getpwuid(os.getuid()).pw_name
    return "\n".join(
        [
            "# Generated by joynr-sim's broker set; rewritten on every start.",
            f"listener {port} 127.0.0.1",
            "allow_anonymous false",
            # Logins, each bound to its client id, added while the broker runs: see brokers.mosquitto.
            f"plugin {plugin}",
            f"plugin_opt_config_file {plugin_config}",
            f"acl_file {acl_file}",
            "max_queued_messages 0",
            # Small joynr frames must not wait for the peer's delayed ACK (~40 ms a hop).
            "set_tcp_nodelay true",
            "persistence true",
            f"persistence_location {persistence_dir}/",
            "persistence_file mosquitto.db",
            "autosave_on_changes true",
            f"autosave_interval {autosave}",
            f"user {user}",
            "log_dest stderr",
            "log_type error",
            "log_type warning",
            "log_type notice",
            "log_type information",
            "connection_messages true",
            "log_timestamp_format %Y-%m-%dT%H:%M:%S",
            "",
        ]
    )


def write_config(path: Path, port: int, plugin: str, plugin_config: Path, acl_file: Path, persistence_dir: Path,
                 autosave: int = AUTOSAVE_CHANGES) -> None:
    persistence_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(config_text(port, plugin, plugin_config, acl_file, persistence_dir, autosave), encoding="utf-8")


# Mosquitto cannot notice that its owner died; a SIGKILLed owner would leave it running.
# This shim asks Linux to SIGKILL it when its parent goes (the setting survives exec), then
# becomes Mosquitto with the same pid, so stop and crash signal Mosquitto itself. Its umask
# keeps what Mosquitto writes (the plugin's config with its password hashes) its owner's.
_EXEC_WITH_PARENT_DEATH_SIGNAL = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass  # not Linux: the broker set's own exit handlers remain
if os.getppid() != int(sys.argv[1]):
    sys.exit("mosquitto launcher: owner exited before the broker started")
os.umask(0o077)
os.execv(sys.argv[2], sys.argv[2:])
"""


def command(binary: str, config_path: Path) -> list[str]:
    return [
        sys.executable, "-c", _EXEC_WITH_PARENT_DEATH_SIGNAL, str(os.getpid()),
        binary, "-c", str(config_path),
    ]
