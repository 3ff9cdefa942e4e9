"""The amqtt broker's process reads a packet without mapping memory for it
(``brokers.malloc.tune_malloc``). asyncio reads a socket with recv() of up to 256 KiB and
shrinks the bytes object to what came; with glibc's default thresholds the 256 KiB could come
from a mapping of its own, shrunk with mremap and unmapped when the packet was freed: an mmap,
an mremap, a munmap and page faults for every packet, once the broker's allocations had left
glibc's dynamic threshold below 256 KiB (strace of a run's broker: as many of each as reads).
The test puts a process in that state and counts the page faults the kernel counts for it
reading as asyncio reads, with and without the broker's settings."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import brokers.amqtt_broker as amqtt_broker

READS = 400
ROOT = Path(__file__).resolve().parent.parent

READER = """
import asyncio, socket, sys
from pathlib import Path

def minor_faults():
    return int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[7])  # minflt

from brokers.malloc import tune_malloc  # imported both ways: only the call differs

if sys.argv[1] == "tuned":
    tune_malloc()

async def main(reads):
    ours, theirs = socket.socketpair()
    got = asyncio.Queue()

    class Reader(asyncio.Protocol):
        def data_received(self, data):
            got.put_nowait(len(data))

    await asyncio.get_running_loop().connect_accepted_socket(Reader, ours)
    for _ in range(50):  # start-up allocations done
        theirs.send(b"x" * 600)
        await got.get()
    before = minor_faults()
    for _ in range(reads):
        theirs.send(b"x" * 600)  # about a joynr frame
        assert await got.get() == 600
    print(minor_faults() - before)

asyncio.run(main(int(sys.argv[2])))
"""


def _faults(mode: str) -> int:
    # The state a broker's history could leave it in, made certain: glibc's mmap threshold at its
    # starting 128 KiB, where 256 KiB reads are mapped (a process's own allocations may or may not
    # have raised it; the test may not depend on which).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MALLOC_MMAP_THRESHOLD_": str(128 * 1024)}
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    done = subprocess.run([sys.executable, "-c", READER, mode, str(READS)], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return int(done.stdout.strip())


def test_reads_as_asyncio_reads_take_no_page_fault_each_with_the_brokers_malloc_settings() -> None:
    plain = _faults("plain")
    tuned = _faults("tuned")
    assert tuned < READS // 10, f"{tuned} page faults for {READS} reads with the broker's settings"
    # What the settings are for: without them the same reads fault.
    assert plain >= READS, f"{plain} page faults for {READS} reads without them"


def test_the_broker_sets_them_before_it_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[str] = []
    monkeypatch.setattr(amqtt_broker, "tune_malloc", lambda: steps.append("tune_malloc"))
    monkeypatch.setattr(amqtt_broker.asyncio, "run", lambda coro: (coro.close(), steps.append("serve"))[1] or 0)
    monkeypatch.setenv(amqtt_broker.SECRET_ENV, "secret")
    assert amqtt_broker.main(["--gbid", "gbid1", "--port", "1883"]) == 0
    assert steps == ["tune_malloc", "serve"]
