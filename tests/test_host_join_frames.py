"""What arrives on the control topics is hostile until checked: each end's handling of one
message, without a broker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import msgpack
import pytest

from joynr_sim.host.join.joined_hosts import JoinedHosts, _Waiter
from joynr_sim.host.join.mqtt_channel import Topics, check_name
from joynr_sim.host.join.supervisor import Supervisor


def _runner(tmp_path: Path) -> JoinedHosts:
    return JoinedHosts("run1", 1, brokers=None, gbid="gbid1", run_dir=tmp_path)


def test_names_are_checked() -> None:
    for bad in ("", "a/b", "+", "#", "x" * 65, "a b", 7, None):
        with pytest.raises(ValueError, match="expected 1 to 64 letters"):
            check_name("run", bad)
    assert Topics("run-1.a_b").host("h") == "joynr-sim-control/run-1.a_b/hosts/h"


def test_the_runner_drops_what_is_no_answer_to_its_own_requests(tmp_path: Path) -> None:
    hosts = _runner(tmp_path)
    topics, session = hosts.topics, hosts.session
    waiter = _Waiter("h1", None)
    hosts._pending[7] = waiter
    answer = {"v": 1, "id": 7, "ok": True, "result": 42}
    hostile = [
        (topics.responses("h1", session), b"\xc1"),                                       # not msgpack
        (topics.responses("h1", session), msgpack.packb([1])),                            # not a map
        (topics.responses("h1", session), msgpack.packb({**answer, "v": 2})),             # another version
        (topics.responses("h1", session), msgpack.packb({**answer, "ok": 1})),            # ok not a bool
        (topics.responses("h1", session), msgpack.packb({**answer, "id": 8})),            # no such request
        (topics.responses("h2", session), msgpack.packb(answer)),                         # another host
        (topics.responses("h1", "someone-else"), msgpack.packb(answer)),                  # another session
        (topics.host("h3"), msgpack.packb({"v": 1, "host": "h4", "address": "127.0.0.2", "pid": 1, "cores": 1})),
        (topics.host("h3"), msgpack.packb({"v": 1, "host": "h3", "address": "example.org", "pid": 1, "cores": 1})),
        (topics.host("h/3"), b""),
    ]
    for topic, payload in hostile:
        hosts._arrived(topic, payload)
    assert len(hosts.drops) == len(hostile) and waiter.answer is None and hosts.hosts == {}
    assert (tmp_path / "log" / "control.log").read_text().count("control.drop") == len(hostile)
    hosts._arrived(topics.responses("h1", session), msgpack.packb(answer))
    assert waiter.answer == (True, 42)
    hosts._arrived(topics.host("h3"), msgpack.packb({"v": 1, "host": "h3", "address": "127.0.0.3", "pid": 9,
                                                     "cores": 2}))
    assert hosts.hosts["h3"].address == "127.0.0.3"
    hosts._arrived(topics.host("h3"), b"")  # it left
    assert hosts.hosts == {}


async def test_the_host_drops_what_is_no_request_and_answers_none_of_it(tmp_path: Path) -> None:
    supervisor = Supervisor("run1", "h1", "127.0.0.2", tmp_path, ("127.0.0.1", 1), None, 1)
    supervisor._loop = asyncio.get_running_loop()
    request = {"v": 1, "worker": 0, "query": False, "message": {"v": 1, "id": 1, "op": "hello",
                                                                 "args": {"version": 1}}}
    topics = supervisor.topics
    hostile = [
        (topics.requests("h1", "s1"), b"\xc1"),
        (topics.requests("h1", "s1"), msgpack.packb({**request, "worker": -1})),
        (topics.requests("h1", "s1"), msgpack.packb({**request, "query": "yes"})),
        (topics.requests("h1", "s1"), msgpack.packb({**request, "extra": 1})),
        (topics.requests("h1", "s1"), msgpack.packb({**request, "message": {"v": 1, "id": -1}})),
        (topics.requests("h1", "s" * 65), msgpack.packb(request)),
        (topics.requests("h2", "s1"), msgpack.packb(request)),      # for another host
        (topics.responses("h1", "s1"), msgpack.packb(request)),     # not a request topic
        (topics.session("s1"), b"maybe"),
    ]
    for topic, payload in hostile:
        supervisor._dispatch(topic, payload)
    assert supervisor.drops == len(hostile) and not supervisor._tasks
    assert supervisor.run_dir("/runs/proxy") == tmp_path / "proxy"
    for bad in ("", "/", "..", "a/.."):
        with pytest.raises(ValueError, match="run_dir: expected a run directory"):
            supervisor.run_dir(bad)
