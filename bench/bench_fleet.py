"""A fleet of cluster controllers and libjoynr runtimes under load, next to the broker's own
QoS 1 round-trip capacity measured in the same run with paho clients on as many cores.

Layout: N cluster controllers on one Mosquitto (no fault proxies), placed one host
process per core (``Simulation(hosts="cores")``; more when a host would hold over 80
cluster controllers, the size measured so far), each with M/N libjoynr runtimes
in its host: the first provides ``joynrsim/Echo`` as ``echo-<k>``, the others each hold a
proxy of the next cluster controller's provider (``echo-<k+1>``, a provisioned MQTT
route), so every call crosses the broker twice (request and reply). Each consumer drives
its calls inside its host (``load``), ``CONCURRENCY`` in flight at a time. The cluster
controllers and libjoynr runtimes purge every 5 s, as a fleet scenario's do
(``joynr_sim.scenario.fleet``).

The broker saves its persistence after every ``AUTOSAVE`` counted changes
(``Simulation(broker_autosave=)``; ``JOYNR_SIM_FLEET_AUTOSAVE=N`` chooses another, 1 is
what scenarios run with): at 1, Mosquitto writes and fsyncs every session of the fleet
after every loop pass that read a PUBACK, on its only thread. The paho baseline runs on the
same broker, so against the same setting.

Baseline: one process per core, each with ``PAIRS`` pairs of paho clients bouncing QoS 1
messages with ``WINDOW`` in flight per pair, for as long as the fleet's load ran (3 to
20 s).

Rows: calls/s and lost calls of the fleet, the paho round trips/s, their ratio; CPU
milliseconds per call of the host processes and runner, and of the broker; start-up
seconds (every runtime started and every proxy made) and peak memory (the sum of every
host process's peak resident set, and the runner's). Last, a cProfile of every host over a
quarter of the load more, after the measured part: Python function calls per call, and the
top functions by own time over all hosts (share of the profile, calls per call).

Sizes: ``JOYNR_SIM_FLEET=CCSxAPPS`` (e.g. ``100x1000``, ``1000x10000``); default 10x100
(``--quick``: 4x20), so ``make bench`` stays within minutes.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import resource
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from brokers import mosquitto
from joynr_sim.core.address import MqttAddress
from joynr_sim.host.process.event_loop import event_loop_choice
from joynr_sim.host.process.peak_memory import peak_mib
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.scenario.fleet import PURGE_MS
from joynr_sim.simulation import Simulation

CONCURRENCY = 4  # calls in flight per consumer
CALLS = 20_000  # in all (--quick: 2,000), shared by the consumers, at least 10 each
PAIRS = 8  # paho client pairs per baseline process
WINDOW = 4  # QoS 1 messages in flight per pair
TTL_MS = 60_000
AUTOSAVE = 1000  # broker changes between saves: two per call, so a save every 500 calls


def fleet_size(quick: bool) -> tuple[int, int]:
    spec = os.environ.get("JOYNR_SIM_FLEET")
    if not spec:
        return (4, 20) if quick else (10, 100)
    try:
        ccs, apps = (int(part) for part in spec.lower().split("x"))
    except ValueError:
        raise SystemExit(f"JOYNR_SIM_FLEET: expected CCSxAPPS such as 100x1000, got {spec!r}") from None
    if ccs < 2 or apps < 2 * ccs:
        raise SystemExit(f"JOYNR_SIM_FLEET: at least 2 cluster controllers and 2 runtimes each, got {spec!r}")
    return ccs, apps


def autosave() -> int:
    spec = os.environ.get("JOYNR_SIM_FLEET_AUTOSAVE")
    if not spec:
        return AUTOSAVE
    try:
        return mosquitto.check_autosave(int(spec))
    except ValueError as exc:
        raise SystemExit(f"JOYNR_SIM_FLEET_AUTOSAVE: {exc}") from None


START_CONCURRENCY = 50  # runtime starts at a time
CCS_PER_HOST = 80
CC_START_CONCURRENCY = 10  # CC starts and GCD adds at a time
PROFILE_TOP = 20


async def _bounded(limit: asyncio.Semaphore, coro: Any) -> Any:
    async with limit:
        return await coro


async def _all(coros: Any) -> list[Any]:
    """Like gather, but the first failure cancels the rest: nothing goes on starting while
    the simulation closes."""
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(c) for c in coros]
    return [t.result() for t in tasks]


def _cpu_seconds(pid: int) -> float:
    """User and system CPU of a process so far (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _paho_worker(host: str, port: int, logins: list[tuple[str, str, str, str]], seconds: float,
                 results: Any) -> None:
    """PAIRS ping/pong pairs, WINDOW messages in flight each, for ``seconds``: round trips."""
    count = 0
    lock = threading.Lock()
    clients = []
    ready = threading.Barrier(2 * len(logins) + 1)

    def client(name: str, password: str) -> paho.Client:
        c = paho.Client(CallbackAPIVersion.VERSION2, client_id=name, protocol=paho.MQTTv311)
        c.username_pw_set(name, password)
        c.on_socket_open = lambda cl, ud, sock: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.on_subscribe = lambda *args: ready.wait(10)
        c.connect(host, port)
        clients.append(c)
        return c

    stop_at = [float("inf")]
    for ping_name, ping_pw, pong_name, pong_pw in logins:
        pinger, ponger = client(ping_name, ping_pw), client(pong_name, pong_pw)

        def pong(c: paho.Client, ud: Any, m: Any, back: str = f"{ping_name}/low") -> None:
            c.publish(back, m.payload, qos=1)

        def ping(c: paho.Client, ud: Any, m: Any, to: str = f"{pong_name}/low") -> None:
            nonlocal count
            with lock:
                count += 1
            if time.perf_counter() < stop_at[0]:
                c.publish(to, m.payload, qos=1)

        ponger.on_message, pinger.on_message = pong, ping
        ponger.subscribe(f"{pong_name}/#", qos=1)
        pinger.subscribe(f"{ping_name}/#", qos=1)
        ponger.loop_start()
        pinger.loop_start()
    ready.wait(10)
    started = time.perf_counter()
    stop_at[0] = started + seconds
    payload = b"x" * 200  # about an encoded echo request
    for (_, _, pong_name, _), i in zip(logins, range(0, 2 * len(logins), 2), strict=True):
        for _ in range(WINDOW):
            clients[i].publish(f"{pong_name}/low", payload, qos=1)
    time.sleep(seconds)
    with lock:
        done = count
    elapsed = time.perf_counter() - started
    for c in clients:
        c.disconnect()
        c.loop_stop()
    results.put(done / elapsed)


def paho_capacity(sim: Simulation, processes: int, seconds: float) -> float:
    """QoS 1 round trips per second the broker carries for paho clients on ``processes`` cores."""
    host, port = sim.brokers.endpoint("gbid1")
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    workers = []
    for p in range(processes):
        logins = []
        for i in range(PAIRS):
            ping, pong = f"bench-ping-{p}-{i}", f"bench-pong-{p}-{i}"
            logins.append((ping, sim.brokers.credentials(ping)[1], pong, sim.brokers.credentials(pong)[1]))
        worker = ctx.Process(target=_paho_worker, args=(host, port, logins, seconds, results))
        worker.start()
        workers.append(worker)
    rates = [results.get(timeout=seconds + 60) for _ in workers]
    for worker in workers:
        worker.join(10)
    return sum(rates)


async def _fleet(ccs: int, apps: int, calls_per_consumer: int, saves: int, *, hosts: int | str | None = None,
                 ray_address: str | None = None, extras: bool = True,
                 after: Any = None) -> dict[str, Any]:
    """hosts: None, one host per core; or as ``Simulation`` takes it (``ray`` at
    ``ray_address``). extras: the profile and the paho baseline. after: awaited with the
    simulation and the (consumer, proxy) pairs once the load was measured; its result is
    the result's ``after``."""
    # One host per core (Simulation(hosts="cores")), but at most CCS_PER_HOST cluster
    # controllers in one: the size measured so far. (It was a hard limit while paho ran a
    # select() thread per connection, which cannot watch a socket numbered above 1024;
    # paho now runs on the host's loop.)
    if hosts is None:
        hosts = max(os.cpu_count() or 1, -(-ccs // CCS_PER_HOST))
    per_cc = apps // ccs
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        async with Simulation(Path(tmp), gbids=["gbid1"], broker="mosquitto", faults=False, hosts=hosts,
                              broker_autosave=saves, ray_address=ray_address) as sim:
            # Every controller's login at once: on Mosquitto a control request per 100
            # logins, not one per controller as each starts.
            await asyncio.to_thread(sim.brokers.admit, [f"cc{k}" for k in range(ccs)])
            controllers = []
            for k in range(ccs):
                nxt = (k + 1) % ccs
                controllers.append(sim.cluster_controller(
                    f"cc{k}", ["gbid1"], provisioned=[(f"echo-{nxt}", MqttAddress("gbid1", f"cc{nxt}"), True)],
                    purge_interval_ms=PURGE_MS))
            logins = asyncio.Semaphore(CC_START_CONCURRENCY)
            controllers = await _all(_bounded(logins, c) for c in controllers)
            starting = asyncio.Semaphore(START_CONCURRENCY)

            async def populate(k: int) -> list[tuple[Any, Any]]:
                cc = controllers[k]
                async with logins:  # the GCD, in the runner, answers an add within 10 s
                    provider = await sim.libjoynr(f"app{k}-0", cc, purge_interval_ms=PURGE_MS)
                    await provider.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id=f"echo-{k}")
                consumers = await _all(
                    _bounded(starting, sim.libjoynr(f"app{k}-{i}", cc, purge_interval_ms=PURGE_MS))
                    for i in range(1, per_cc))
                proxies = await _all(c.create_proxy("joynrsim/Echo", f"echo-{(k + 1) % ccs}") for c in consumers)
                return list(zip(consumers, proxies, strict=True))

            pairs = [p for group in await _all(populate(k) for k in range(ccs)) for p in group]
            startup_s = time.perf_counter() - started
            pids = sorted({r.pid for r in sim.runtimes.values() if getattr(r, "pid", None)})
            # Warm up every route, then measure.
            await _all(app.load(proxy.participant_id, proxy.provider_participant_id, "echo", ["w"],
                                  calls=2, concurrency=1, ttl_ms=TTL_MS) for app, proxy in pairs)
            broker_pid = sim.brokers.pid("gbid1")
            cpu0 = sum(_cpu_seconds(pid) for pid in pids) + time.process_time()
            broker0 = _cpu_seconds(broker_pid) if broker_pid else 0.0
            t0 = time.perf_counter()
            results = await _all(
                app.load(proxy.participant_id, proxy.provider_participant_id, "echo", ["x" * 100],
                         calls=calls_per_consumer, concurrency=CONCURRENCY, ttl_ms=TTL_MS)
                for app, proxy in pairs)
            wall = time.perf_counter() - t0
            cpu = sum(_cpu_seconds(pid) for pid in pids) + time.process_time() - cpu0
            broker_cpu = (_cpu_seconds(broker_pid) if broker_pid else 0.0) - broker0
            profile = await _profile(sim, pairs, max(2, calls_per_consumer // 4)) if extras else None
            peak_mb = sum(peak_mib(pid) for pid in pids)
            runner_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            paho_rate = (await asyncio.to_thread(paho_capacity, sim, sim.hosts, min(max(wall, 3.0), 20.0))
                         if extras else None)
            afterwards = await after(sim, pairs) if after is not None else None
    ok = sum(r["ok"] for r in results)
    failed: dict[str, int] = {}
    for r in results:
        for name, n in r["failed"].items():
            failed[name] = failed.get(name, 0) + n
    return {"hosts": sim.hosts, "processes": len(pids), "after": afterwards,
            "calls": len(pairs) * calls_per_consumer, "ok": ok,
            "failed": failed, "wall": wall, "cpu": cpu, "broker_cpu": broker_cpu, "startup": startup_s,
            "peak_mb": peak_mb, "runner_mb": runner_mb, "paho_rate": paho_rate, "profile": profile}


async def _profile(sim: Simulation, pairs: list[tuple[Any, Any]], calls_per_consumer: int) -> dict[str, Any]:
    """A cProfile of every host process over a quarter of the load, after the measured part
    (the profiler makes each call several times dearer): where the hosts spend a call's CPU.
    Functions are added up over the hosts by name; counts are per call."""
    processes = {r.process for r in sim.runtimes.values() if getattr(r, "process", None) is not None}
    await _all(p.profile(True) for p in processes)
    results = await _all(
        app.load(proxy.participant_id, proxy.provider_participant_id, "echo", ["x" * 100],
                 calls=calls_per_consumer, concurrency=CONCURRENCY, ttl_ms=TTL_MS)
        for app, proxy in pairs)
    found = await _all(p.profile(False) for p in processes)
    ok = max(1, sum(r["ok"] for r in results))
    own = sum(f["own_s"] for f in found) or 1.0
    merged: dict[str, list[float]] = {}
    for f in found:
        for t in f["top"]:
            m = merged.setdefault(t["function"], [0.0, 0])
            m[0] += t["own_s"]
            m[1] += t["calls"]
    top = sorted(merged.items(), key=lambda kv: kv[1][0], reverse=True)[:PROFILE_TOP]
    return {"calls": ok, "function_calls": sum(f["function_calls"] for f in found) / ok,
            "top": [(name, own_s / own * 100, calls / ok) for name, (own_s, calls) in top]}


def run(quick: bool) -> list[dict]:
    ccs, apps = fleet_size(quick)
    consumers = apps - ccs
    calls = max(10, (CALLS // 10 if quick else CALLS) // consumers)
    saves = autosave()
    r = asyncio.run(_fleet(ccs, apps, calls, saves))
    group = f"mosquitto (autosave {saves}) {ccs} CCs / {apps} runtimes, {r['hosts']} hosts on {event_loop_choice()}"
    rate = r["ok"] / r["wall"]
    return [
        {"group": group, "name": "fleet calls", "value": rate, "unit": "calls/s",
         "calls": r["calls"], "in_flight": (apps - ccs) * CONCURRENCY},
        {"group": group, "name": "calls lost or failed", "value": r["calls"] - r["ok"], "unit": "calls",
         "failed": r["failed"]},
        {"group": group, "name": "paho QoS 1 round trips (same broker and autosave, same cores)",
         "value": r["paho_rate"], "unit": "round trips/s", "in_flight": r["hosts"] * PAIRS * WINDOW},
        {"group": group, "name": "fleet calls ÷ paho round trips", "value": rate / r["paho_rate"], "unit": "ratio"},
        {"group": group, "name": "CPU per call (hosts, runner and broker)",
         "value": (r["cpu"] + r["broker_cpu"]) / max(r["ok"], 1) * 1e3, "unit": "ms"},
        {"group": group, "name": "CPU per call (hosts and runner)", "value": r["cpu"] / max(r["ok"], 1) * 1e3,
         "unit": "ms"},
        {"group": group, "name": "CPU per call (broker)", "value": r["broker_cpu"] / max(r["ok"], 1) * 1e3,
         "unit": "ms"},
        {"group": group, "name": "start-up (runtimes started, proxies made)", "value": r["startup"], "unit": "s"},
        {"group": group, "name": "peak memory of the host processes", "value": r["peak_mb"], "unit": "MiB",
         "processes": r["processes"]},
        {"group": group, "name": "peak memory of the runner", "value": r["runner_mb"], "unit": "MiB"},
        {"group": group, "name": "Python function calls per call in the hosts (profiled)",
         "value": r["profile"]["function_calls"], "unit": "calls", "calls": r["profile"]["calls"]},
    ] + [{"group": f"{group}: hosts' top functions by own time", "name": name, "value": share,
          "unit": "% of profile", "calls_per_call": round(per_call, 2)}
         for name, share, per_call in r["profile"]["top"]]
