"""Running a fleet scenario (``fleet_model``): the population started in shared host
processes, the load driven inside them, the waves fired at their times, the calls counted
per wave window, the expectations judged.

Phases, each reported as a step of the run (so ``run.json``, the summary and the reports
show them like the steps of any scenario):

1. the population, as a pipeline: the broker logins of all cluster controllers admitted
   up front (on Mosquitto one control request per 100), then each controller started (``CC_START_CONCURRENCY`` at a
   time), its libjoynr runtimes in its host (``START_CONCURRENCY``), its providers
   registered (``REGISTER_CONCURRENCY``: the GCD, in the runner's process, answers each
   add within its bound) and each proxy discovered by participant id once its target is
   registered (``PROXY_CONCURRENCY``);
2. the load, for ``duration_s``: each proxy's calls are a ``load`` control op carried out
   inside its host, one op per proxy per slice of ``slice_s`` seconds carrying
   ``rate × slice_s`` calls (a whole number), the proxies' ops spread evenly over the slice.
   The slice is at least a second and long enough that the runner sends at most
   ``MAX_OPS_PER_S`` ops a second, so 9,000 proxies do not make the runner the bottleneck;
3. the waves, each at its ``at_s`` after the load started;
4. an expectation each: ``lost``, ``failed`` (at most), ``answered_fraction`` (at least).

A call counts in the window of the wave before its op started (``before waves`` until the
first). ``answered``: a reply came; ``failed``: an error reply (joynr's
ProviderRuntimeException and the like); ``lost``: no reply within its ttl_ms
(JoynrTimeoutException), or its op never came back (the host died): then every call of
the op counts as lost, with the reason.

A restart in a wave stops the cluster controller gracefully and starts it again in the
same host process: the libjoynr runtimes next to it live on and reconnect, as the
applications on a machine whose cluster controller is restarted do. (A crash would kill the
host process and every runtime in it; see docs/howto/fleet.md.) The restarted controller's
``removeStale`` removes its providers' global registrations from the GCD, so, as a joynr
application does once its cluster controller is back (the library scenario
``websocket-provider-survives-cc-restart``), the providers register again under their
participant ids: after every libjoynr participant of the controller is announced to it
again (a polled bound, ``RECONNECT_TIMEOUT_S``), before the controller counts as restarted.
``register_providers: false`` leaves them unregistered.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from ..core.address import WebSocketClientAddress
from ..core.errors import JoynrRuntimeException, JoynrTimeoutException
from ..host.process.peak_memory import peak_mib
from ..runtime.participants import INTERFACES
from ..simulation import Simulation
from ..trace import TraceWriter
from .fleet_load import MAX_OPS_PER_S, one_op, slicing, windows
from .fleet_model import Fleet, Wave
from .fleet_tasks import StrayCancellation, WaveError, _all, _bounded, _raise_first

CCS_PER_HOST = 80  # the host size measured so far (bench fleet); open files bound it
CC_START_CONCURRENCY = 20
START_CONCURRENCY = 100
REGISTER_CONCURRENCY = 20
PROXY_CONCURRENCY = 50
# A runtime's purge (expired waiting messages and routes) every 5 s, not every second:
# 11,000 runtimes' purges each second were a fifth of the hosts' CPU while they started,
# and the controllers' a twelfth of the 300-controller start's. What waits (while a
# controller restarts) expires up to 5 s after its ttl; joynr's own routing-table cleanup
# runs once a minute.
PURGE_MS = 5000
# A fleet's libjoynr runtimes try to reach their restarted controller once a second, not
# ten times (the runtime's default): while a loaded machine's wave had 500 controllers
# down, their 4,500 runtimes' refused connections (89,000 by the end of the load, 700 to
# 870 a second with the hosts starved) took CPU the restarts needed. A restarted controller so
# waits up to a second longer for its runtimes.
RECONNECT_INTERVAL_MS = 1000
# A fleet's controller waits for its broker's CONNACK up to 50 s, not 10 s, before its start
# fails: paho goes on trying either way, and a loaded machine's restart wave failed 458 of
# 500 restarts on the 10 s bound (first: "no CONNACK for client id 'cc460' within 10 s"),
# tighter than the runner's own 60 s for the start (ops.REQUEST_TIMEOUT_S), which still
# bounds it and which the host's named error comes before.
CONNECT_TIMEOUT_MS = 50_000
# A provider's registration or a proxy's discovery that found no answer in its bound (a
# starved host or GCD) is tried again, as joynr's arbitration looks up again every retry
# interval until its discovery timeout: at most this many tries, then the start fails.
START_TRIES = 3
RECONNECT_TIMEOUT_S = 30.0  # for a restarted controller's libjoynr runtimes to announce their participants
RECONNECT_POLL_S = 0.25  # each poll asks the controller's host once per participant still missing
Progress = Callable[[str], None]
__all__ = ["MAX_OPS_PER_S", "FleetRunner", "StrayCancellation", "WaveError", "fleet_hosts", "wave_steps", "windows"]


def fleet_hosts(fleet: Fleet, hosts: int | str | None) -> int | str:
    """Host processes for a fleet: as asked; by default (or ``cores``) one per core, but
    at most ``CCS_PER_HOST`` cluster controllers in one (duplicates included). On Ray
    (``ray``), one per CPU of the cluster: one with fewer CPUs than the fleet needs hosts is
    refused (``RayUnavailable``) before anything starts."""
    if isinstance(hosts, int):
        return hosts
    ccs = fleet.cluster_controllers + max((w.duplicate_cc_ids or 0 for w in fleet.waves), default=0)
    needed = math.ceil(ccs / CCS_PER_HOST)
    if hosts == "ray":
        from ..host.ray.ray_hosts import connect, enough

        enough(connect(), needed, f"a fleet of {ccs} cluster controllers, at most {CCS_PER_HOST} in a host,")
        return hosts
    return max(os.cpu_count() or 1, needed)


def wave_steps(fleet: Fleet) -> list[tuple[str, str, int]]:
    """The phases as steps: (kind, title, line)."""
    pop = (f"start {fleet.cluster_controllers} cluster controllers, "
           f"{fleet.cluster_controllers * fleet.libjoynr_per_cc} libjoynr runtimes")
    load = f"load {fleet.calls_per_second_per_proxy:g} calls/s per proxy for {fleet.duration_s} s"
    steps = [("population", pop, fleet.population_line), ("load", load, fleet.load_line)]
    steps += [("wave", f"at {w.at_s} s: {w.title}", w.line) for w in fleet.waves]
    for key, value in fleet.expect.items():
        bound = f"at least {value:g}" if key == "answered_fraction" else f"at most {value}"
        steps.append(("expect", f"expect {key} {bound}", fleet.expect_lines[key]))
    return steps


class FleetRunner:
    def __init__(self, fleet: Fleet, sim: Simulation, trace: TraceWriter, seed: int,
                 on_progress: Progress = lambda text: None) -> None:
        self.fleet = fleet
        self.sim = sim
        self.trace = trace
        self.seed = seed
        self.progress = on_progress
        self.ccs: list[Any] = []
        self.pairs: list[tuple[Any, Any]] = []  # (consumer runtime, proxy)
        self.by_cc: list[list[Any]] = []  # each controller's libjoynr runtimes, providers first
        self.adds = asyncio.Semaphore(REGISTER_CONCURRENCY)
        self.windows = windows(fleet)
        self.summary: dict[str, Any] = {}

    # -- the population ---------------------------------------------------------------------
    async def populate(self) -> None:
        """Each controller's start runs on into its libjoynr runtimes and its providers'
        registrations, and each proxy is discovered as soon as its runtime runs and its
        target is registered: the phases overlap, so the hosts, the broker and the GCD
        are busy together, each stage bounded by its own limit. (One phase after the
        other, the 300-controller start waited on round trips with CPU left idle.)"""
        f, sim = self.fleet, self.sim
        started = time.perf_counter()
        gbids = list(f.gbids) or None
        apps, providers, proxies = (f.cluster_controllers * n for n in (f.libjoynr_per_cc, f.providers_per_cc,
                                                                          f.proxies_per_cc))
        counts = {"controllers started": [0], "libjoynr runtimes started": [0], "providers registered": [0],
                  "proxies built": [0]}
        totals = dict(zip(counts, (f.cluster_controllers, apps, providers, proxies), strict=True))
        logins, starting = asyncio.Semaphore(CC_START_CONCURRENCY), asyncio.Semaphore(START_CONCURRENCY)
        lookups = asyncio.Semaphore(PROXY_CONCURRENCY)
        registered = {f.provider_participant(k, i): asyncio.Event()
                      for k in range(f.cluster_controllers) for i in range(f.providers_per_cc)}
        self.ccs = [None] * f.cluster_controllers
        self.by_cc = [[] for _ in range(f.cluster_controllers)]
        self.pairs = [None] * proxies  # type: ignore[list-item]

        def tick(what: str) -> None:
            self._tick(counts[what], totals[what], what)

        async def one_app(k: int, j: int) -> Any:
            app = await sim.libjoynr(f"app{k}-{j}", self.ccs[k], purge_interval_ms=PURGE_MS,
                                     reconnect_interval_ms=RECONNECT_INTERVAL_MS)
            tick("libjoynr runtimes started")
            return app

        async def register(k: int, i: int) -> None:
            await self._tried(lambda: self._register(k, i))
            registered[f.provider_participant(k, i)].set()
            tick("providers registered")

        async def proxy(k: int, i: int) -> None:
            await registered[f.target_of(k, i)].wait()
            app = self.by_cc[k][f.providers_per_cc + i]
            async with lookups:
                built = await self._tried(lambda: app.discover_proxy(f.interface, participant_id=f.target_of(k, i),
                                                                     scope=f.proxy_scope))
            self.pairs[k * f.proxies_per_cc + i] = (app, built)
            tick("proxies built")

        async def controller(k: int) -> None:
            self.ccs[k] = await _bounded(logins, sim.cluster_controller(f"cc{k}", gbids, purge_interval_ms=PURGE_MS,
                                                                        connect_timeout_ms=CONNECT_TIMEOUT_MS))
            tick("controllers started")
            self.by_cc[k] = await _all(_bounded(starting, one_app(k, j)) for j in range(f.libjoynr_per_cc))
            await _all([*(_bounded(self.adds, register(k, i)) for i in range(f.providers_per_cc)),
                        *(proxy(k, i) for i in range(f.proxies_per_cc))])

        # Every controller's login at once (on Mosquitto a control request per 100 logins
        # rather than one per controller as each starts).
        await asyncio.to_thread(sim.brokers.admit, [f"cc{k}" for k in range(f.cluster_controllers)])
        await _all(controller(k) for k in range(f.cluster_controllers))
        self.summary["startup_s"] = round(time.perf_counter() - started, 3)

    async def _register(self, k: int, i: int) -> None:
        """Provider ``i`` of cluster controller ``k``, under its participant id."""
        f = self.fleet
        await self.by_cc[k][i].register_provider(f.domain, f.interface, INTERFACES[f.interface](),
                                                 participant_id=f.provider_participant(k, i), scope=f.provider_scope)

    async def _reconnected(self, k: int) -> None:
        """Polls until every libjoynr participant of cluster controller ``k`` (its providers
        and proxies) has its WebSocketClient route in the restarted controller again: the
        runtimes reconnected and announced them (addNextHop). Bounded by RECONNECT_TIMEOUT_S.
        Asked without blocking (``lookup_route``): a blocking query per lookup held the
        runner's loop while a busy host answered, hundreds of times a second in a wave."""
        f, cc = self.fleet, self.ccs[k]
        waiting = [f.provider_participant(k, i) for i in range(f.providers_per_cc)]
        waiting += [proxy.participant_id for _, proxy in self.pairs[k * f.proxies_per_cc:(k + 1) * f.proxies_per_cc]]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RECONNECT_TIMEOUT_S
        while True:
            waiting = [pid for pid in waiting
                       if not isinstance(getattr(await cc.lookup_route(pid), "address", None), WebSocketClientAddress)]
            if not waiting:
                return
            if loop.time() > deadline:
                raise TimeoutError(f"{len(waiting)} libjoynr participants not announced again within "
                                   f"{RECONNECT_TIMEOUT_S:g} s (first: {waiting[0]})")
            await asyncio.sleep(RECONNECT_POLL_S)

    async def _tried(self, action: Callable[[], Any]) -> Any:
        """``action()`` again after a timeout (only then: an error reply is an answer), up to
        START_TRIES tries; the retries are counted in the summary (``start_retries``)."""
        for attempt in range(1, START_TRIES + 1):
            try:
                return await action()
            except JoynrRuntimeException as exc:
                if type(exc) not in (JoynrRuntimeException, JoynrTimeoutException) or attempt == START_TRIES:
                    raise
                self.summary["start_retries"] = self.summary.get("start_retries", 0) + 1

    def _tick(self, done: list[int], total: int, what: str) -> None:
        done[0] += 1
        if done[0] == total or done[0] % max(1, total // 20) == 0:
            self.progress(f"{what}: {done[0]}/{total}")

    # -- load and waves -----------------------------------------------------------------------
    def slicing(self) -> tuple[float, int]:
        return slicing(self.fleet.calls_per_second_per_proxy, len(self.pairs))

    async def drive(self, on_wave: Callable[[Wave, BaseException | None], None]) -> None:
        """The load for duration_s with the waves; returns when every op came back."""
        f = self.fleet
        slice_s, calls = self.slicing()
        self.summary.update(hosts=self.sim.hosts, slice_s=slice_s, calls_per_op=calls)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        ops: list[asyncio.Task] = []
        waves = [asyncio.create_task(self._wave(w, t0, on_wave)) for w in f.waves]
        n = len(self.pairs)
        schedule = sorted((j * slice_s / n + s * slice_s, j)
                          for j in range(n)
                          for s in range(math.ceil(f.duration_s / slice_s))
                          if j * slice_s / n + s * slice_s < f.duration_s)
        for at, j in schedule:
            delay = t0 + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # a schedule: the op's time comes
            if j == 0:
                self.progress(f"load: {int(at)}/{f.duration_s} s")
            ops.append(asyncio.create_task(self._op(j, at, calls)))
        await asyncio.sleep(max(0.0, t0 + f.duration_s - loop.time()))
        self.progress(f"load: waiting for {sum(not o.done() for o in ops)} ops in flight")
        await asyncio.gather(*ops, *waves)
        self.summary["load_s"] = round(loop.time() - t0, 3)

    async def _op(self, j: int, at: float, calls: int) -> None:
        app, proxy = self.pairs[j]
        await one_op(app, proxy, self.fleet, next(w for w in reversed(self.windows) if w.from_s <= at), calls)

    async def _wave(self, wave: Wave, t0: float, on_wave: Callable[[Wave, BaseException | None], None]) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, t0 + wave.at_s - loop.time()))
        error: BaseException | None = None
        try:
            if wave.restart is not None:
                await self._restart(wave, t0)
            elif wave.crash_broker is not None:
                await self.sim.brokers.crash_broker(wave.crash_broker.gbid)
                if wave.crash_broker.for_s is not None:
                    await asyncio.sleep(max(0.0, t0 + wave.at_s + wave.crash_broker.for_s - loop.time()))
                    await self.sim.brokers.start_broker(wave.crash_broker.gbid)
            else:
                await self._duplicate(wave.duplicate_cc_ids or 0)
        except Exception as exc:
            error = exc
        on_wave(wave, error)

    async def _restart(self, wave: Wave, t0: float) -> None:
        r = wave.restart
        assert r is not None
        n = self.fleet.cluster_controllers
        chosen = random.Random(f"{self.seed}-{wave.index}").sample(range(n), math.ceil(r.fraction * n))
        gap = r.over_s / (len(chosen) - 1) if len(chosen) > 1 else 0.0
        loop = asyncio.get_running_loop()
        done = [0]

        async def one(i: int, k: int) -> None:
            await asyncio.sleep(max(0.0, t0 + wave.at_s + i * gap - loop.time()))
            cc = self.ccs[k]
            try:
                await cc.stop()
                await cc.start()
                if r.register_providers:  # its removeStale removed them from the GCD
                    await self._reconnected(k)
                    await _all(_bounded(self.adds, self._register(k, i)) for i in range(self.fleet.providers_per_cc))
            except Exception as exc:  # named, so the wave's error says which and why
                raise WaveError(f"restart of cc{k}: {type(exc).__name__}: {exc}") from exc
            self._tick(done, len(chosen), f"wave {wave.index}: controllers restarted")

        # One restart that fails does not stop the others: the wave goes on as it would.
        _raise_first(await asyncio.gather(*(one(i, k) for i, k in enumerate(chosen)), return_exceptions=True))

    async def _duplicate(self, count: int) -> None:
        gbids = list(self.fleet.gbids) or None
        logins = asyncio.Semaphore(CC_START_CONCURRENCY)

        async def twin(k: int) -> None:
            try:
                await self.sim.cluster_controller(f"cc{k}", gbids, runtime_id=f"cc{k}-twin", purge_interval_ms=PURGE_MS,
                                                  connect_timeout_ms=CONNECT_TIMEOUT_MS)
            except Exception as exc:
                raise WaveError(f"start of cc{k}-twin: {type(exc).__name__}: {exc}") from exc

        _raise_first(await asyncio.gather(*(_bounded(logins, twin(k)) for k in range(count)), return_exceptions=True))

    # -- the phases as steps ------------------------------------------------------------------
    async def run(self, outcomes: list[Any], on_step: Callable[[Any], None], keep_going: bool) -> None:
        """Each phase fills in its step outcome (``runner.StepOutcome``: outcome, detail,
        duration_ms), traced as a ``step`` and handed to ``on_step`` as it ends."""
        population, load, *rest = outcomes
        waves, expects = rest[:len(self.fleet.waves)], rest[len(self.fleet.waves):]
        begun = time.perf_counter()

        def finish(outcome: Any, index: int, detail: str | None, since: float) -> None:
            outcome.outcome, outcome.detail = ("ok", "") if detail is None else ("failed", detail)
            outcome.duration_ms = (time.perf_counter() - since) * 1000
            self.trace.emit("step", index=index, name=outcome.title, outcome=outcome.outcome,
                            detail=outcome.detail, line=outcome.line)
            on_step(outcome)

        try:
            await self.populate()
            finish(population, 0, None, begun)
        except Exception as exc:
            finish(population, 0, f"{type(exc).__name__}: {exc}", begun)
            if not keep_going:
                return
        begun = time.perf_counter()

        def on_wave(wave: Wave, error: BaseException | None) -> None:
            detail = None if error is None else str(error) if isinstance(error, WaveError) else (
                f"{type(error).__name__}: {error}")
            finish(waves[wave.index], 2 + wave.index, detail, begun)

        await self.drive(on_wave)
        finish(load, 1, None, begun)
        for i, (outcome, (key, bound)) in enumerate(zip(expects, self.fleet.expect.items(), strict=True)):
            finish(outcome, 2 + len(waves) + i, self.judge(key, bound), time.perf_counter())

    # -- the outcome --------------------------------------------------------------------------
    def totals(self) -> dict[str, Any]:
        keys = ("started", "answered", "failed", "lost")
        total: dict[str, Any] = {k: sum(getattr(w, k) for w in self.windows) for k in keys}
        total["answered_fraction"] = total["answered"] / total["started"] if total["started"] else 0.0
        return total

    def judge(self, key: str, bound: float) -> str | None:
        """Why the expectation ``key`` does not hold, or None."""
        got = self.totals()[key]
        if key == "answered_fraction":
            return None if got >= bound else f"{got:.4f} of the calls were answered, expected at least {bound:g}"
        return None if got <= bound else f"{got} calls {key}, expected at most {bound}"

    def report(self) -> dict[str, Any]:
        """Each process's own peak memory (the hosts', the runner's, the brokers'; an
        in-process broker counts in the runner's): their sum bounds the run's total."""
        pids = sorted({r.pid for r in self.sim.runtimes.values() if getattr(r, "pid", None)})
        brokers = sum(peak_mib(self.sim.brokers.pid(gbid)) for gbid in self.sim.gbids)
        return {**self.summary, "host_processes": len(pids), "host_peak_mib": round(sum(map(peak_mib, pids)), 1),
                "runner_peak_mib": round(peak_mib(os.getpid()), 1), "broker_peak_mib": round(brokers, 1),
                "windows": [asdict(w) for w in self.windows], "totals": self.totals()}

