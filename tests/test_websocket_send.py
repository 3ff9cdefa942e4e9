"""The WebSocket transport's send_soon: written within the call when the connection can take
the frame, queued behind websockets' flow control otherwise, always in the order of the calls."""

from __future__ import annotations

import asyncio

from joynr_sim.runtime.base import Runtime
from joynr_sim.transport import websocket
from joynr_sim.transport.websocket import WebSocketClient, WebSocketServer


async def _pair() -> tuple[WebSocketServer, WebSocketClient, list[bytes | str], list[str]]:
    frames: list[bytes | str] = []
    gone: list[str] = []
    server = WebSocketServer(lambda cid, frame: frames.append(frame), lambda cid: None, gone.append,
                             lambda reason, detail: None)
    await server.start()
    client = WebSocketClient(f"ws://127.0.0.1:{server.port}", "app-1", lambda frame: None, lambda: None)
    await client.start()
    for _ in range(200):
        if "app-1" in server.clients:
            break
        await asyncio.sleep(0.01)
    return server, client, frames, gone


async def _until(condition, timeout_s: float = 5.0) -> None:
    for _ in range(int(timeout_s / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met in time")


async def test_an_open_connection_takes_the_frame_within_the_call() -> None:
    server, client, frames, _ = await _pair()
    try:
        tasks = len(asyncio.all_tasks())
        failed: list[int] = []
        client.send_soon(b"one", lambda: failed.append(1))
        assert len(asyncio.all_tasks()) == tasks  # no task per frame
        assert client._ws is not None and not client._ws.protocol.writes  # handed to the socket
        await _until(lambda: frames == [b"one"])
        assert not failed
    finally:
        await client.stop()
        await server.stop()


async def test_frames_keep_their_order_across_a_paused_connection() -> None:
    server, client, frames, _ = await _pair()
    try:
        ws = client._ws
        assert ws is not None
        ws.pause_writing()  # what the transport calls when its buffer is full
        for n in range(5):
            client.send_soon(b"%d" % n, lambda: None)
        assert not frames
        ws.resume_writing()
        # The connection can take frames again, but five wait before these: they must not
        # overtake them.
        for n in range(5, 10):
            client.send_soon(b"%d" % n, lambda: None)
        await _until(lambda: len(frames) == 10)
        assert frames == [b"%d" % n for n in range(10)]
    finally:
        await client.stop()
        await server.stop()


async def test_a_frame_for_no_connection_fails_and_a_crash_drops_what_waits() -> None:
    server, client, frames, _ = await _pair()
    try:
        failed: list[str] = []
        server.send_soon("nobody", b"x", lambda: failed.append("nobody"))
        assert failed == ["nobody"]
        ws = client._ws
        assert ws is not None
        ws.pause_writing()
        client.send_soon(b"held", lambda: failed.append("held"))
        client.abort()  # a crash: what waited in memory is gone, and not reported as sent
        client.send_soon(b"after", lambda: failed.append("after"))
        assert failed == ["nobody", "after"]
        await asyncio.sleep(0.1)
        assert b"held" not in frames
    finally:
        await server.stop()


async def test_a_send_handed_over_before_a_halt_does_not_run_after_it() -> None:
    """A runtime schedules each frame where a spawned task would have started; a crash or
    stop in between cancels it as it cancelled the task, even when the runtime is started
    again before the loop gets to it."""
    class Scheduling:  # the two methods under test, without a whole runtime
        _life = 0
        soon = Runtime.soon

    runtime = Scheduling()
    sent: list[str] = []
    runtime.soon(sent.append, "before")
    await asyncio.sleep(0)
    runtime.soon(sent.append, "halted")
    runtime._life += 1  # what _halt does
    runtime.soon(sent.append, "after")
    await asyncio.sleep(0)
    assert sent == ["before", "after"]


async def test_frames_sent_on_a_refused_connection_go_again_on_the_next() -> None:
    # A server that refuses the client's first frame (here its token, the first time; a
    # server that read it too late does the same) delivers none of the frames sent after it.
    frames: list[bytes | str] = []
    refusals: list[str] = []
    closed: list[int] = []

    def authenticate(client_id: str, token: object) -> bool:
        refusals.append(client_id)
        return len(refusals) > 1

    server = WebSocketServer(lambda cid, frame: frames.append(frame), lambda cid: None, lambda cid: None,
                             lambda reason, detail: None, authenticate=authenticate)
    await server.start()
    client = WebSocketClient(f"ws://127.0.0.1:{server.port}", "app-1", lambda frame: None,
                             lambda: closed.append(1), token="t")
    try:
        await client.start()
        failed: list[bytes] = []
        for n in range(3):
            client.send_soon(b"%d" % n, lambda n=n: failed.append(b"%d" % n))
        await _until(lambda: closed == [1])  # refused: code 1008, nothing handed on
        assert frames == [] and not client.connected
        await client.start()
        client.send_soon(b"after", lambda: failed.append(b"after"))
        await _until(lambda: frames == [b"0", b"1", b"2", b"after"])
        assert not failed
    finally:
        await client.stop()
        await server.stop()


async def test_frames_are_not_sent_twice_once_the_server_has_answered() -> None:
    server, client, frames, _ = await _pair()
    try:
        client.send_soon(b"one", lambda: None)
        await _until(lambda: frames == [b"one"])
        server.send_soon("app-1", b"answer", lambda: None)
        await _until(lambda: client._unconfirmed is None)  # the server accepted the connection
        ws = client._ws
        assert ws is not None
        await ws.close(code=1008)  # even a refusal now cannot have dropped what it delivered
        await _until(lambda: not client.connected)
        await client.start()
        client.send_soon(b"two", lambda: None)
        await _until(lambda: frames[-1:] == [b"two"])
        assert frames == [b"one", b"two"]
    finally:
        await client.stop()
        await server.stop()


async def test_a_client_keeps_a_bounded_number_of_unanswered_frames(monkeypatch) -> None:
    monkeypatch.setattr(websocket, "MAX_UNCONFIRMED_BYTES", 10)
    server, client, frames, _ = await _pair()
    try:
        client.send_soon(b"12345", lambda: None)
        assert client._unconfirmed is not None and len(client._unconfirmed) == 1
        client.send_soon(b"678901", lambda: None)  # 11 bytes: over the bound, nothing more is kept
        assert client._unconfirmed is None
        await _until(lambda: frames == [b"12345", b"678901"])  # sent all the same
    finally:
        await client.stop()
        await server.stop()
