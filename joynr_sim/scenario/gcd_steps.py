"""The GCD steps of a scenario: expect_gcd (and ``wait: until: gcd``), gcd_call, and unregister
(whose removal from the GCD a step may expect to fail), carried out by the ``ScenarioRunner``
they are part of.

``gcd_call`` is a cluster controller calling one backend's GCD instance itself, over its own
connection and as its discovery provider, as joynr's cluster controller does: seed 001's
examples are such calls ("CC: Call lookup(providerParticipantId, [GBID1])"). It reaches what
no provider registration or proxy can: GBIDs the cluster controller would refuse itself
(INVALID_GBID, UNKNOWN_GBID) and an instance other than the first selected GBID's.

An unregistration removes the provider from the GCD, and joynr's cluster controller only logs
what the GCD answers (NO_ENTRY_FOR_PARTICIPANT, NO_ENTRY_FOR_SELECTED_BACKENDS): the
unregistration itself succeeds. A step that expects such an error reads the answer where the
cluster controller records it, its ``lcd.unregister`` trace event.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..core.discovery import GlobalDiscoveryEntry
from ..core.gcd import GCD_PARTICIPANT_ID
from ..runtime.discovery import GCD_CALL_TTL_MS, discovery_provider_participant_id
from ..trace import read_events
from .failure import StepFailed
from .model import participant_ref, thaw

WAIT_FOR_TRACE_MS = 10_000  # the trace reaches its file at the end of the writer's loop turn


class GcdSteps:
    """What the runner does for the GCD steps."""

    async def _step_expect_gcd(self, a: Mapping[str, Any]) -> None:
        problem = await self._gcd_problem(a)
        if problem:
            raise StepFailed(problem, await self._context(self.participant(a["participant"])))

    async def _gcd_problem(self, a: Mapping[str, Any]) -> str | None:
        pid = self.participant(a["participant"])
        if not self.sim.gcds:
            return "expect_gcd reads the run's own GCD's store, and this run's GCD is external (--gcd external)"
        gcd = next(iter(self.sim.gcds.values()))
        now = self.sim.clock.now_ms()
        rows = await gcd.run(lambda g: {
            r.gbid for r in g.store.all_rows()
            if r.entry.participant_id == pid and r.entry.expiry_date_ms >= now
        })
        wanted = set(a.get("gbids") or self.scenario.backends)
        present = a.get("present", True)
        if present and a.get("exact") and rows != wanted:
            return f"GCD holds {pid} in {sorted(rows) or 'no backend'}, expected exactly {sorted(wanted)}"
        if present and not wanted <= rows:
            return f"GCD holds {pid} in {sorted(rows) or 'no backend'}, expected {sorted(wanted)}"
        if not present and wanted & rows:
            return f"GCD still holds {pid} in {sorted(wanted & rows)}"
        return None

    async def _step_unregister(self, a: Mapping[str, Any]) -> None:
        runtime, pid = self._provider(a["provider"])
        expected = a.get("expect_error")
        trace = self.sim.run_dir / "trace" / f"{self._cc_of(a['runtime'])}.ndjson"
        before = len(_unregistrations(trace, pid))
        await runtime.unregister_provider(pid)
        if expected is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_FOR_TRACE_MS / 1000
        while len(found := _unregistrations(trace, pid)) <= before:
            if loop.time() > deadline:
                raise StepFailed(f"the cluster controller recorded no removal of {pid} from the GCD")
            await asyncio.sleep(0.02)
        error = found[-1].get("error")
        if error != expected:
            got = f"failed with {error}" if error else "succeeded"
            raise StepFailed(f"expected the GCD's remove of {pid} (gbids {found[-1].get('gbids')}) to fail with "
                             f"{expected}, it {got}", await self._context(pid))

    def _cc_of(self, runtime_id: str) -> str:
        spec = next(s for s in self.scenario.runtimes if s.id == runtime_id)
        return spec.id if spec.is_cluster_controller else spec.cc

    async def _step_gcd_call(self, a: Mapping[str, Any]) -> None:
        spec = next(s for s in self.scenario.runtimes if s.id == a["runtime"])
        cc = self._cc(spec.id)
        gbid = a.get("gbid") or (spec.gbids or self.scenario.backends)[0]
        params = [_participants(self, p) for p in thaw(a.get("args") or [])]
        sender = discovery_provider_participant_id(spec.cc_id or spec.id)

        async def call():
            return await cc.request(sender, GCD_PARTICIPANT_ID, a["method"], params, ttl_ms=GCD_CALL_TTL_MS,
                                    gbid=gbid)

        result = await self._expecting_error(a, call)
        want = a.get("returns")
        if want is not None and a.get("expect_error") is None:
            got = [_where(e) for e in (result if isinstance(result, list) else [result])]
            if got != list(want):
                raise StepFailed(f"{a['method']} on the GCD of {gbid} returned {got}, expected {list(want)}")


def _participants(runner: Any, value: Any) -> Any:
    """``@name`` (a provider or proxy of an earlier step) as its participant id, in lists too."""
    if isinstance(value, str) and participant_ref(value) is not None:
        return runner.participant(value)
    if isinstance(value, list):
        return [_participants(runner, v) for v in value]
    return value


def _where(wire: Any) -> str:
    """A returned entry as ``participantId@GBID`` (the broker URI the GCD set in its address)."""
    entry = GlobalDiscoveryEntry.from_wire(wire)
    return f"{entry.participant_id}@{getattr(entry.address, 'broker_uri', type(entry.address).__name__)}"


def _unregistrations(trace, participant_id: str) -> list[dict[str, Any]]:
    return [e for e in read_events(trace) if e.get("ev") == "lcd.unregister" and e.get("participant") == participant_id]
