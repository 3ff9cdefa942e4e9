"""Run a scenario: claim its run directory, build its topology, execute its steps (see
``steps``), record the trace and a ``run.json`` manifest.

Outcomes: ``passed``; ``failed``, a step did not hold (the rest are ``skipped``); ``error``,
the run could not be carried out: it could not be set up (``SetupError``: a broker, the
GCD store or a port could not be reached) or failed outside a step. The topology is torn
down either way, every runtime and broker even when one of them fails to stop.

``run.json`` is written as soon as the run directory exists, marked ``"complete": false``,
and again at the end; it stays incomplete, with the error, when set-up failed or the run
was interrupted. An unexpected exception keeps its traceback there (the run's, or the
step's). A password never reaches it: the broker choice is recorded redacted.

A write to the run directory that fails, here or in a host process (a trace, an outbox, a
link store, a routing-table store, ``run.json`` itself: ``joynr_sim.write_failure``), ends
the run after the step during which it happened (the simulation is asked after every
step; a fleet's after its last phase): outcome ``error``, ``complete`` false, and as
``error`` the one line ``cannot write <path>: <reason>`` (``write_failure``: its path and
reason). A run whose ``run.json`` cannot be written says that too, in the result it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import random
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from brokers import BrokerError, BrokerSpecError, MosquittoNotFound, redact
from brokers.promises import declared

from ..core.gcd import OWN_GCD
from ..core.ids import ids_seeded, seeded_ids
from ..core.variants import parse_rule_set, rule_set
from ..host.ray.ray_hosts import RayUnavailable
from ..network import MEMORY, check_network, virtual_loop
from ..network.virtual_loop import on_virtual_time
from ..simulation import Simulation
from ..trace import TraceWriter
from ..wire.codecs import DEFAULT_WIRE
from ..write_failure import Failures, WriteFailure, record, unwatch, watch
from .fleet import FleetRunner, fleet_hosts, wave_steps
from .model import Scenario
from .provenance import broker_properties, installed_versions, redacted_broker
from .rundir import GENERATOR, MANIFEST, claim_run_dir
from .steps import ScenarioRunner, StepFailed

STEP_GAP_S = 0.001  # on the memory network: the runner's time from one step to the next


class SetupError(Exception):
    """The topology could not be set up: a broker, the GCD store or a port could not be
    reached or started. The message is one line naming what and where; the exception it
    was raised from is its ``__cause__``."""


@dataclass
class StepOutcome:
    index: int
    kind: str
    title: str
    line: int
    outcome: str = "skipped"  # ok | failed | skipped
    detail: str = ""
    context: str = ""
    duration_ms: float = 0.0
    traceback: str = ""  # only when the step failed with an unexpected exception


@dataclass
class RunResult:
    scenario: str
    path: str | None
    run_dir: str
    run_id: str
    policy: str  # the routing policy the run's rules keep (what the checks judge by)
    broker: str  # as given, with every password shown as ***
    seed: int
    reproduces: dict[str, str]
    network: str = ""  # memory, amqtt or mosquitto as asked; empty: the broker decided
    started: str = ""
    ended: str = ""
    duration_s: float = 0.0
    outcome: str = "failed"  # passed | failed | error
    complete: bool = False  # set up, and every step ran or the run stopped at a failed one
    error: str = ""
    traceback: str = ""
    # The first write to the run directory that failed: {"path", "reason"}; empty when none did.
    write_failure: dict[str, str] = field(default_factory=dict)
    steps: list[StepOutcome] = field(default_factory=list)
    versions: dict[str, str] = field(default_factory=dict)
    brokers: dict[str, str] = field(default_factory=dict)  # GBID -> broker URL
    fleet: dict[str, Any] = field(default_factory=dict)  # a fleet's calls per wave window (``fleet``)
    # What the broker kind is declared to keep (brokers.promises): property id -> kept, how, relied_on
    broker_properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    variant: str = ""  # the variant over the policy (core.variants); empty: the seeds' rules
    wire: str = DEFAULT_WIRE  # the bytes its messages travelled in (wire.codecs)
    gcd: str = OWN_GCD  # the run's own GCD instances, or an external one (core.gcd)

    @property
    def column(self) -> str:
        """The policy or variant the run was asked for: its column in a matrix."""
        return self.variant or self.policy

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @property
    def write_failed(self) -> WriteFailure | None:
        return WriteFailure(**self.write_failure) if self.write_failure else None

    @property
    def failed_step(self) -> StepOutcome | None:
        return next((s for s in self.steps if s.outcome == "failed"), None)


def _iso(epoch_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s)) + f".{int(epoch_s * 1000) % 1000:03d}Z"


def _is_environment(exc: BaseException) -> bool:
    """What the machine or network did, not a fault of joynr-sim: no traceback needed."""
    if isinstance(exc, (OSError, BrokerError, BrokerSpecError, MosquittoNotFound, RayUnavailable)):
        return True
    psycopg = sys.modules.get("psycopg")  # loaded only when a PostgreSQL store was asked for
    return psycopg is not None and isinstance(exc, psycopg.Error)


def _format(exc: BaseException) -> str:
    return redact("".join(traceback.format_exception(exc)))


async def run_scenario(
    scenario: Scenario,
    out_dir: str | Path,
    *,
    policy: str | None = None,
    broker: str | None = None,
    seed: int | None = None,
    gcd_store: str | None = None,
    on_step: Callable[[StepOutcome], None] = lambda outcome: None,
    keep_going: bool = False,
    join: tuple[str, int, float] | None = None,
    hosts: int | str | None = None,
    on_progress: Callable[[str], None] = lambda text: None,
    network: str | None = None,
) -> RunResult:
    """Run one scenario into ``<out_dir>/<scenario name>/``.

    ``join``: (run name, hosts, seconds to wait for them): the runtimes run on hosts joined from other machines, which
    connect directly (no fault proxies).

    ``keep_going``: a failed step does not end the run (explore's schedules: a call that
    times out while a broker is down is an outcome to record, the checks judge the trace).
    ``hosts``: the runtimes in that many host processes (``"cores"``: one per core; see
    ``Simulation``); None: one process per runtime, but a fleet scenario's default is
    ``"cores"``. ``on_progress``: a fleet's progress, one line at a time.

    An earlier run directory of joynr-sim there is replaced; anything else raises
    ``RunDirError`` and is left as it is. Set-up failures do not raise: the result's
    outcome is ``error`` and ``complete`` is false.

    ``network``: ``memory``, ``amqtt`` or ``mosquitto`` (None: ``broker`` decides). On
    ``memory`` the run happens in virtual time on a loop of its own (in a thread, unless the
    caller's loop is one already) with every id drawn from the seed: the same seed gives
    the same trace, byte for byte."""
    if network is not None:
        check_network(network)
    seed = random.randrange(2**31) if seed is None else seed
    if network == MEMORY and (not on_virtual_time() or not ids_seeded()):
        if join is not None:
            raise ValueError("network: the memory network runs in this process; it cannot join hosts")
        run = functools.partial(run_scenario, scenario, out_dir, policy=policy, broker=broker, seed=seed,
                                gcd_store=gcd_store, on_step=on_step, keep_going=keep_going, hosts=hosts,
                                on_progress=on_progress, network=network)
        if not on_virtual_time():  # a loop of its own, in a thread: the caller's loop goes on
            return await asyncio.to_thread(virtual_loop.run, run())
        with seeded_ids(seed):  # every id of the run from its seed (tasks inherit the context)
            return await run()
    run_dir = claim_run_dir(out_dir, scenario.name)
    failures = watch(run_dir)  # every write under it that fails is this run's
    started = time.time()
    broker = broker or scenario.broker
    policy = policy or scenario.policy  # a policy or a variant over the scenario's own
    try:
        judged, variant = parse_rule_set(rule_set(scenario.policy, policy))
    except ValueError:  # refused at the set-up below, as the run's error
        judged, variant = policy, None
    if network == MEMORY:  # the run id is in every trace line: the seed's, not the moment's
        run_id = f"{scenario.name}-{_digest(f'{seed}/{policy}/{network}')}"
    else:
        run_id = f"{scenario.name}-{uuid.uuid4().hex[:12]}"  # unique: the checker keeps runs apart by it
    result = RunResult(
        scenario=scenario.name,
        path=str(scenario.path) if scenario.path else None,
        run_dir=str(run_dir),
        run_id=run_id,
        policy=judged,
        variant=variant.name if variant else "",
        broker=MEMORY if network == MEMORY else redacted_broker(broker),
        network=network or "",
        wire=scenario.wire,
        gcd=scenario.gcd,
        broker_properties=declared(MEMORY) if network == MEMORY else broker_properties(broker),
        seed=seed,
        reproduces={"seed": scenario.reproduces.seed, "scenario": scenario.reproduces.scenario},
        started=_iso(started),
        versions=installed_versions(),
        steps=([StepOutcome(i, *s) for i, s in enumerate(wave_steps(scenario.fleet))] if scenario.fleet
               else [StepOutcome(s.index, s.kind, s.title, s.line) for s in scenario.steps]),
    )
    _save_manifest(result)  # from here on the folder is recognisably a run directory
    sim: Simulation | None = None
    trace: TraceWriter | None = None
    try:
        if failures.failure is not None:
            raise failures.failure  # not even run.json could be written: nothing runs
        try:
            joined = dict(join=join[0], join_hosts=join[1], join_timeout_s=join[2], faults=False) if join else {}
            if network == MEMORY:
                hosts = None  # every runtime on the one virtual-time loop
            elif scenario.fleet:
                hosts = fleet_hosts(scenario.fleet, hosts)
            sim = Simulation(run_dir, gbids=list(scenario.backends), broker=broker, network=network,
                             policy=rule_set(scenario.policy, result.column),
                             gcd_last_seen_timeout_ms=scenario.gcd_last_seen_timeout_ms, wire=scenario.wire,
                             run_id=result.run_id, seed=seed, gcd_store=gcd_store, gcd=scenario.gcd, hosts=hosts,
                             broker_autosave=scenario.fleet.broker_autosave if scenario.fleet else None,
                             **(joined or {"faults": scenario.fleet is None}))
            trace = TraceWriter(run_dir, result.run_id, "runner", "runner", sim.clock)
            await sim.start()
            result.brokers = {gbid: sim.brokers.url(gbid) for gbid in sim.gbids}
            if scenario.fleet is not None:
                fleet = FleetRunner(scenario.fleet, sim, trace, seed, on_progress)
            else:
                runner = ScenarioRunner(scenario, sim)
                await runner.build()
        except Exception as exc:
            if failures.failure is not None:  # what the set-up tripped over
                raise failures.failure from exc
            text = str(exc) if _is_environment(exc) else f"{type(exc).__name__}: {exc}"
            raise SetupError(redact(text) or type(exc).__name__) from exc
        await _stop_on_write_failure(sim)
        if scenario.fleet is not None:
            try:
                await fleet.run(result.steps, on_step, keep_going)
            finally:
                result.fleet = fleet.report()
            await _stop_on_write_failure(sim)
        else:
            try:
                await _run_steps(scenario, runner, trace, result, on_step, keep_going)
            finally:
                await runner.cancel_background()
        result.complete = True
        result.outcome = "failed" if result.failed_step else "passed"
    except WriteFailure as exc:
        result.outcome, result.error, result.complete = "error", str(exc), False
    except SetupError as exc:
        result.outcome, result.error = "error", f"set-up failed: {exc}"
        if exc.__cause__ is not None and not _is_environment(exc.__cause__):
            result.traceback = _format(exc.__cause__)
    except Exception as exc:  # a fault of the runner itself
        result.outcome, result.error = "error", redact(f"{type(exc).__name__}: {exc}")
        result.traceback = _format(exc)
    except BaseException:  # interrupted (Ctrl-C cancels the run): the manifest says so
        result.outcome, result.error, result.complete = "error", "interrupted", False
        raise
    finally:
        try:
            if sim is not None:
                await _teardown(sim, result)
        finally:
            if trace is not None:
                trace.close()
            ended = time.time()
            result.ended, result.duration_s = _iso(ended), ended - started
            try:
                _conclude(result, failures)
            finally:
                unwatch(run_dir)
    return result


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


async def _stop_on_write_failure(sim: Simulation) -> None:
    """Raise the run's write failure, if a write failed anywhere so far."""
    failure = await sim.check_write_failure()
    if failure is not None:
        raise failure  # what the run records is incomplete from here: no more steps


def _conclude(result: RunResult, failures: Failures) -> None:
    """A write that failed makes the run an error, whatever else it ended with (only an
    interruption keeps its own words); then ``run.json``, which may fail to be written too."""
    failure = failures.failure
    if failure is not None:
        result.write_failure = {"path": failure.path, "reason": failure.reason}
        result.complete = False
        if result.error != "interrupted":
            result.outcome, result.error = "error", str(failure)
    manifest = _save_manifest(result)
    if manifest is not None and manifest != failure:
        result.outcome, result.complete = "error", False
        result.error = f"{result.error}; {manifest}" if result.error else str(manifest)
        result.write_failure = result.write_failure or {"path": manifest.path, "reason": manifest.reason}


def _save_manifest(result: RunResult) -> WriteFailure | None:
    """``write_manifest``; a write that fails is recorded for the run and returned."""
    try:
        write_manifest(result)
    except OSError as exc:
        return record(Path(result.run_dir) / MANIFEST, exc)
    return None


async def _run_steps(scenario: Scenario, runner: ScenarioRunner, trace: TraceWriter, result: RunResult,
                     on_step: Callable[[StepOutcome], None], keep_going: bool = False) -> None:
    for step, outcome in zip(scenario.steps, result.steps):
        t = time.perf_counter()
        try:
            await runner.run_step(step)
            outcome.outcome = "ok"
            if runner.sim.network is not None:
                # A step reaches the runtimes over a control channel, which takes a
                # millisecond or more; in virtual time it would take none, and a crash
                # could overtake the PUBACK its runtime sent in the turn before.
                await asyncio.sleep(STEP_GAP_S)
        except StepFailed as exc:
            outcome.outcome, outcome.detail, outcome.context = "failed", str(exc), exc.context
        except Exception as exc:  # an unexpected error fails the step; its traceback is kept
            outcome.outcome, outcome.detail = "failed", redact(f"{type(exc).__name__}: {exc}")
            outcome.traceback = _format(exc)
        outcome.duration_ms = (time.perf_counter() - t) * 1000
        trace.emit("step", index=step.index, name=step.title, outcome=outcome.outcome,
                   detail=outcome.detail, line=step.line)
        on_step(outcome)
        await _stop_on_write_failure(runner.sim)
        if outcome.outcome == "failed" and not keep_going:
            break


async def _teardown(sim: Simulation, result: RunResult) -> None:
    try:
        await sim.close()  # stops everything even when interrupted, then raises
    except Exception as exc:
        if not result.error:
            result.outcome, result.error = "error", redact(f"teardown: {type(exc).__name__}: {exc}")
            result.traceback = _format(exc)
    except BaseException:
        if not result.error:
            result.outcome, result.error, result.complete = "error", "interrupted", False
        raise


def write_manifest(result: RunResult) -> Path:
    """``run.json``, replaced in one rename so it is never half written; an OSError leaves
    the one before it as it was."""
    path = Path(result.run_dir) / MANIFEST
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps({"generator": GENERATOR, **asdict(result)}, indent=2))
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):  # a half-written temporary is no file of the run
            tmp.unlink(missing_ok=True)
        raise
    return path
