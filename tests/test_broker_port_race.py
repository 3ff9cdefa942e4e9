"""A broker set whose chosen port is taken by another process's MQTT broker before its own
broker binds it: the readiness probe meets the other broker, which refuses our credentials."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers import BrokerSet, broker_set
from brokers.listeners import listening_inodes, listens_on

CONNACK_NOT_AUTHORIZED = bytes([0x20, 0x02, 0x00, 0x05])


class RefusingBroker:
    """A listener in this process that answers every connection with CONNACK 5."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind((broker_set.HOST, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.refused = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            with conn:
                conn.settimeout(5)
                try:
                    if conn.recv(4096):
                        conn.sendall(CONNACK_NOT_AUTHORIZED)
                        self.refused += 1
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()
        self._thread.join(timeout=5)


@pytest.fixture
def refusing_broker() -> Iterator[RefusingBroker]:
    squatter = RefusingBroker()
    yield squatter
    squatter.close()


def test_listens_on_tells_a_listener_of_this_process_from_another_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        assert listening_inodes(port)
        assert listens_on(os.getpid(), port) is True
        assert listens_on(1, port) is False  # init holds no socket of ours
    assert listens_on(os.getpid(), port) is False  # closed: nobody listens


def test_listens_on_without_proc_cannot_tell(tmp_path: Path) -> None:
    assert listening_inodes(1883, proc=tmp_path) is None
    assert listens_on(os.getpid(), 1883, proc=tmp_path) is None


def test_listens_on_a_process_that_exited_is_false(tmp_path: Path) -> None:
    # A broker whose bind failed may exit between the refused probe and this look: a
    # process without fds listens on nothing, so the refusal was another's.
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:075B 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 4242 1\n",
        encoding="ascii",
    )
    assert listens_on(12345, 0x075B, proc=tmp_path) is False


def test_listening_inodes_skips_malformed_lines(tmp_path: Path) -> None:
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:075B 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 4242 1\n"
        "   1: 0100007F:ZZZZ 00000000:0000 0A 00000000:00000000 00:00000000 00000000 0 0 17 1\n"
        "   2: short line\n"
        "   3: 0100007F:075B 0100007F:1234 01 00000000:00000000 00:00000000 00000000 0 0 99 1\n",
        encoding="ascii",
    )
    assert listening_inodes(0x075B, proc=tmp_path) == {4242}


@pytest.mark.e2e
async def test_a_port_taken_by_another_broker_moves_the_start_to_a_fresh_port(
    tmp_path: Path, refusing_broker: RefusingBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks: list[int] = []
    real_free_ports = broker_set._free_ports

    def first_the_taken_port(count: int, exclude: set[int]) -> list[int]:
        ports = [refusing_broker.port] if not picks else real_free_ports(count, exclude)
        picks.extend(ports)
        return ports

    monkeypatch.setattr(broker_set, "_free_ports", first_the_taken_port)
    async with BrokerSet(["gbid-a"], broker="amqtt", run_dir=tmp_path) as brokers:
        host, port = brokers.endpoint("gbid-a")
        assert port != refusing_broker.port and port == picks[-1]
    assert refusing_broker.refused >= 1  # the probe did meet the other broker first
    log = (tmp_path / "brokers" / "gbid-a.log").read_text(encoding="utf-8")
    assert f"on port {refusing_broker.port}" in log and f"on port {port}" in log
