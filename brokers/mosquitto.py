"""Mosquitto as one GBID's broker: finding it and its dynamic security plugin, and the
command that runs it so that it dies with its owner.

What is Mosquitto's own in a broker set lives next to this module; the broker set
(``brokers.kinds``) is their only user and reaches all of it through the names here:

- ``brokers.mosquitto_config``: the config and ACL files a broker reads at start: one
  loopback listener, anonymous access off, ``max_queued_messages 0``, and persistence saved
  after every ``autosave`` counted changes (``AUTOSAVE_CHANGES`` = 1 by default; its
  docstring says what a save costs and what a SIGKILL loses);
- ``brokers.mosquitto_logins``: ``Accounts``, the logins through the dynamic security
  plugin, each bound to its client id (its docstring says why not a password file);
- ``brokers.mosquitto_control``: ``send_logins``, adding logins to a running broker over
  the plugin's control topic, without a reload.

This module keeps the process: which binary and plugin, and the launcher it is started
through.
"""

from __future__ import annotations

import glob
import os
import shutil
import sys
from pathlib import Path

# The broker set reaches Mosquitto through this module alone (``mosquitto.send_logins``, ...),
# so a test that replaces one of these names here replaces what the broker set calls.
from .mosquitto_config import AUTOSAVE_CHANGES, acl_section, acl_text, check_autosave, write_config
from .mosquitto_control import CHUNK_LOGINS, CONTROL_TIMEOUT_S, ControlError, send_logins
from .mosquitto_logins import Accounts

__all__ = [
    "AUTOSAVE_CHANGES", "CHUNK_LOGINS", "CONTROL_TIMEOUT_S", "DYNSEC_PLUGIN", "SYSTEM_BINARY", "Accounts",
    "ControlError", "MosquittoNotFound", "acl_section", "acl_text", "check_autosave", "command", "find_binary",
    "find_plugin", "send_logins", "write_config",
]

SYSTEM_BINARY = Path("/usr/sbin/mosquitto")
DYNSEC_PLUGIN = "mosquitto_dynamic_security.so"
# Where Mosquitto 2.0 packages put the plugin (Debian: the multiarch directory).
_PLUGIN_GLOBS = ("/usr/lib/*/" + DYNSEC_PLUGIN, "/usr/lib/" + DYNSEC_PLUGIN,
                 "/usr/lib64/" + DYNSEC_PLUGIN, "/usr/local/lib/" + DYNSEC_PLUGIN,
                 "/usr/local/lib/*/" + DYNSEC_PLUGIN)


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
