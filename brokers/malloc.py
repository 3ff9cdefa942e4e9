"""glibc's malloc thresholds for a process that reads sockets with asyncio (the amqtt broker's).

asyncio reads a socket with recv() of up to 256 KiB and shrinks the bytes object to what came.
Once a process's allocations have left glibc's dynamic mmap threshold below that, every read's
256 KiB comes from a mapping of its own, shrunk with mremap and unmapped when the packet is
freed: an mmap, an mremap, a munmap and page faults per packet (strace of a run's amqtt broker:
as many of each as reads), never amortised, as a freed mapping that small does not raise the
threshold again. Whether a run's broker got there depended on its history: the brokers of the
two wires in one bench differed by it. A fixed threshold above 256 KiB serves those reads from
the heap, and a trim threshold well above it keeps the heap from being given back after every
packet.
"""

from __future__ import annotations

import contextlib
import ctypes

MMAP_THRESHOLD, TRIM_THRESHOLD = 1 << 20, 8 << 20
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters


def tune_malloc() -> None:
    """Set the thresholds where the C library is glibc; elsewhere leave malloc as it is."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None)
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
