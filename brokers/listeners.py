"""Whose listening socket a loopback port is: the readiness probe's alibi check.

A broker set picks a free port and then starts a broker on it; between the two another
process (another test run, another simulator) may bind the same port. The readiness probe
then meets that process's broker, which refuses our credentials, while our broker is still
starting or is about to fail its bind. Read from Linux's ``/proc``: the inodes of the
sockets listening on the port (``/proc/net/tcp`` and ``tcp6``, state 0A) and the socket
inodes a process holds open (``/proc/<pid>/fd``).
"""

from __future__ import annotations

import os
from pathlib import Path

_LISTEN = "0A"
_PROC = Path("/proc")


def listening_inodes(port: int, proc: Path = _PROC) -> set[int] | None:
    """Inodes of the TCP sockets listening on ``port`` (any address); None without /proc."""
    found: set[int] = set()
    seen_table = False
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text(encoding="ascii", errors="replace").splitlines()
        except OSError:
            continue
        seen_table = True
        for line in lines[1:]:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            _, _, port_hex = fields[1].rpartition(":")
            try:
                if int(port_hex, 16) == port:
                    found.add(int(fields[9]))
            except ValueError:
                continue
    return found if seen_table else None


def socket_inodes(pid: int, proc: Path = _PROC) -> set[int] | None:
    """Inodes of the sockets process ``pid`` holds open; None when its fds cannot be read."""
    fd_dir = proc / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return None
    inodes: set[int] = set()
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue  # closed meanwhile
        if target.startswith("socket:[") and target.endswith("]"):
            try:
                inodes.add(int(target[8:-1]))
            except ValueError:
                continue
    return inodes


def listens_on(pid: int, port: int, proc: Path = _PROC) -> bool | None:
    """Whether ``pid`` holds a socket listening on ``port``; None when /proc cannot tell."""
    listening = listening_inodes(port, proc)
    if listening is None:
        return None
    held = socket_inodes(pid, proc)
    if held is None:
        # /proc works, but the process's fds are gone: it exited (a broker whose bind
        # failed, not reaped yet, is a zombie without fds) and listens on nothing.
        return False
    return bool(listening & held)
