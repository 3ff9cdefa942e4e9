"""Mosquitto as one GBID's broker: finding the binary, its password file and its config.

Every broker of a set gets its own generated config ``<run dir>/brokers/<gbid>.conf`` and
persistence directory ``<run dir>/brokers/<gbid>.mosquitto/``:

- one listener on the loopback interface and the port the broker set chose;
- anonymous access off; every client logs in as itself (``use_username_as_clientid``:
  the username is the session's client id, so one client cannot take over another's
  session) with its own password, from a password file in Mosquitto's own PBKDF2-SHA512
  format written without needing ``mosquitto_passwd``; an ACL file gives each user the
  grants of ``brokers.access`` (``Accounts`` keeps both files);
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
"""

from __future__ import annotations

import base64
import hashlib
import os
import pwd
import shutil
import sys
from pathlib import Path

from . import access

AUTOSAVE_CHANGES = 1
MAX_AUTOSAVE_CHANGES = 1_000_000
SYSTEM_BINARY = Path("/usr/sbin/mosquitto")

# Mosquitto's "$6$" password hash: SHA-512 of password and a 12-byte salt. Not the "$7$"
# PBKDF2 of mosquitto_passwd: on every reload (SIGHUP, one per client id first seen)
# Mosquitto checks each connected client's password again, so the hash is computed once
# per client per reload; with 101 PBKDF2 iterations the reload took 32 ms on average over
# the first 200 cluster controllers (70 ms at 200), with one SHA-512 9 ms. Iterations
# slow down guessing a weak password; these are 128-bit HMAC outputs (brokers.access),
# and the file is readable by its owner only.
_SALT_BYTES = 12


class MosquittoNotFound(RuntimeError):
    pass


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


def password_line(username: str, password: str, salt: bytes | None = None) -> str:
    """One password-file line in the "$6$" format Mosquitto reads (mosquitto_passwd 1.x wrote it)."""
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    digest = hashlib.sha512(password.encode() + salt).digest()
    b64 = base64.b64encode
    return f"{username}:$6${b64(salt).decode()}${b64(digest).decode()}\n"


def acl_section(username: str) -> str:
    """The ACL file's lines for one user: its grants from ``brokers.access``.

    Mosquitto 2.0.11 checks these when it delivers and when it accepts a PUBLISH (or sends
    a will), not at SUBSCRIBE: a SUBACK grants any filter, and the messages outside the
    grants never arrive."""
    lines = [f"user {username}"]
    lines += [f"topic {g.access} {g.topic_filter}" for g in access.grants(username)]
    return "\n".join(lines) + "\n"


def _replace(path: Path, text: str) -> None:
    """Write the whole file at once, readable by its owner only: a reload never sees half."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class Accounts:
    """The users the Mosquitto brokers of a set let in, as the two files Mosquitto reads
    at start and on SIGHUP: ``mosquitto.passwd`` and ``mosquitto.acl`` in ``directory``.

    Users are added while brokers run (a cluster controller is created after its
    brokers); every addition counts a new ``generation``, and ``write`` puts every user
    added so far into the files at once, so users added while a reload was under way
    share the next one. Each written generation also holds a fresh ``canary`` user, so a
    broker that lets the canary in has loaded every user of that generation. Not
    thread-safe: the broker set holds a lock.
    """

    def __init__(self, directory: Path, secret: str) -> None:
        self.password_path = directory / "mosquitto.passwd"
        self.acl_path = directory / "mosquitto.acl"
        self._secret = secret
        self._lines: dict[str, str] = {}
        self._acl: dict[str, str] = {}  # kept, not rebuilt per write: a write is O(users) already
        self._added: dict[str, int] = {}
        self.generation = 0
        self.written = -1  # the generation in the files
        for username in (access.ADMIN_USERNAME, access.PROBE_USERNAME):
            self._remember(username)

    @property
    def canary(self) -> str:
        """The canary of the generation in the files."""
        return f"{access.PROBE_USERNAME}-{self.written}"

    def canary_login(self) -> tuple[str, str]:
        return self.canary, access.password(self._secret, self.canary)

    def add(self, username: str) -> int:
        """Add ``username`` (a checked client id); the generation from which the files
        hold it (written or not yet)."""
        if username not in self._added:
            self.generation += 1
            self._remember(username)
        return self._added[username]

    def _remember(self, username: str) -> None:
        self._lines[username] = password_line(username, access.password(self._secret, username))
        self._acl[username] = acl_section(username)
        self._added[username] = self.generation

    def write(self) -> int:
        """Every user added so far into the files; the generation written."""
        self.written = self.generation
        canary = self.canary
        canary_line = password_line(canary, access.password(self._secret, canary))
        _replace(self.password_path, "".join(self._lines.values()) + canary_line)
        header = "# Generated by joynr-sim's broker set from brokers.access; rewritten when a client is added.\n"
        _replace(self.acl_path, header + "".join(self._acl.values()) + acl_section(canary))
        return self.written


def check_autosave(autosave: object) -> int:
    """``autosave``: counted changes between saves, an int from 1 to ``MAX_AUTOSAVE_CHANGES``."""
    if type(autosave) is not int or not 1 <= autosave <= MAX_AUTOSAVE_CHANGES:
        raise ValueError(f"autosave: expected the number of changes between Mosquitto's saves, "
                         f"1 to {MAX_AUTOSAVE_CHANGES:,}, got {autosave!r}")
    return autosave


def config_text(port: int, accounts: Accounts, persistence_dir: Path, autosave: int = AUTOSAVE_CHANGES) -> str:
    check_autosave(autosave)
    password_file, acl_file = accounts.password_path, accounts.acl_path
    for name, value in (("password_file", password_file), ("acl_file", acl_file), ("persistence_dir", persistence_dir)):
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
            f"password_file {password_file}",
            f"acl_file {acl_file}",
            # A client's session is the one of its username: nobody takes over another's.
            "use_username_as_clientid true",
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


def write_config(path: Path, port: int, accounts: Accounts, persistence_dir: Path,
                 autosave: int = AUTOSAVE_CHANGES) -> None:
    persistence_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(config_text(port, accounts, persistence_dir, autosave), encoding="utf-8")


# Mosquitto cannot notice that its owner died; a SIGKILLed owner would leave it running.
# This shim asks Linux to SIGKILL it when its parent goes (the setting survives exec), then
# becomes Mosquitto with the same pid, so stop and crash signal Mosquitto itself.
_EXEC_WITH_PARENT_DEATH_SIGNAL = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except (OSError, AttributeError):
    pass  # not Linux: the broker set's own exit handlers remain
if os.getppid() != int(sys.argv[1]):
    sys.exit("mosquitto launcher: owner exited before the broker started")
os.execv(sys.argv[2], sys.argv[2:])
"""


def command(binary: str, config_path: Path) -> list[str]:
    return [
        sys.executable, "-c", _EXEC_WITH_PARENT_DEATH_SIGNAL, str(os.getpid()),
        binary, "-c", str(config_path),
    ]
