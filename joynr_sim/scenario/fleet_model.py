"""A fleet scenario's ``fleet:`` block as the loader hands it over: validated, read-only.

The schema has bounded every number and named every key; this module checks what it
cannot say: that the population is at most ``MAX_RUNTIMES`` runtimes, that the provider
participant id pattern and the proxies' target use only their placeholders and give an id,
that every proxy's target names a provider of the population, that the waves come in order
within ``duration_s``, that a broker crash names a backend, and that ``expect`` says
something. Errors go through the loader's ``error(at, message)``, so they read
``file:line: fleet.waves[1].at_s: what``.

Naming: cluster controller ``k`` (from 0) is runtime and CC id ``cc<k>``; its libjoynr
runtimes are ``app<k>-<j>`` (``j`` from 0): the first ``providers.per_cc`` each register one
provider, the others each hold one proxy.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .schema import At

MAX_RUNTIMES = 100_000  # cluster controllers and libjoynr runtimes together
PROVIDER_FIELDS = ("cc", "i")
TARGET_FIELDS = ("cc", "next", "prev", "i")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")


@dataclass(frozen=True)
class Restart:
    fraction: float
    over_s: int
    register_providers: bool = True  # again, once the runtimes have reconnected


@dataclass(frozen=True)
class BrokerCrash:
    gbid: str
    for_s: int | None  # None: it stays down


@dataclass(frozen=True)
class Wave:
    index: int
    at_s: int
    line: int
    restart: Restart | None = None
    crash_broker: BrokerCrash | None = None
    duplicate_cc_ids: int | None = None

    @property
    def title(self) -> str:
        if self.restart is not None:
            again = "" if self.restart.register_providers else " (providers not registered again)"
            return f"restart {self.restart.fraction:g} of the cluster controllers over {self.restart.over_s} s{again}"
        if self.crash_broker is not None:
            back = f" for {self.crash_broker.for_s} s" if self.crash_broker.for_s else " (not restarted)"
            return f"crash broker {self.crash_broker.gbid}{back}"
        return f"duplicate {self.duplicate_cc_ids} CC ids"


@dataclass(frozen=True)
class Fleet:
    cluster_controllers: int
    libjoynr_per_cc: int
    gbids: tuple[str, ...]  # empty: all backends
    providers_per_cc: int
    provider_id: str  # the participant id pattern: {cc}, {i}
    domain: str
    interface: str
    provider_scope: str  # LOCAL | GLOBAL
    target: str  # a proxy's provider: {cc}, {next}, {prev}, {i}
    proxy_scope: str
    calls_per_second_per_proxy: float
    method: str
    args: tuple[Any, ...]
    ttl_ms: int
    duration_s: int
    waves: tuple[Wave, ...]
    expect: Mapping[str, Any]  # lost, failed, answered_fraction: those given
    line: int
    expect_lines: Mapping[str, int]  # where each expectation is written
    population_line: int
    load_line: int
    broker_autosave: int | None = None  # Mosquitto's changes between saves; None: every change

    @property
    def runtimes(self) -> int:
        return self.cluster_controllers * (1 + self.libjoynr_per_cc)

    @property
    def proxies_per_cc(self) -> int:
        return self.libjoynr_per_cc - self.providers_per_cc

    def provider_participant(self, cc: int, i: int) -> str:
        return self.provider_id.format(cc=cc, i=i)

    def target_of(self, cc: int, i: int) -> str:
        """The provider the ``i``-th proxy of cluster controller ``cc`` calls."""
        n = self.cluster_controllers
        return self.target.format(cc=cc, next=(cc + 1) % n, prev=(cc - 1) % n, i=i)


def _fields(pattern: str) -> list[str] | None:
    """The placeholders of a pattern, or None when it is no format string."""
    try:
        parsed = list(string.Formatter().parse(pattern))
    except ValueError:
        return None
    names = []
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if spec or conversion or not name:
            return None
        names.append(name)
    return names


def _check_pattern(pattern: str, allowed: tuple[str, ...], at: At, error: Callable[[At, str], Exception]) -> None:
    names = _fields(pattern)
    choices = ", ".join(f"{{{n}}}" for n in allowed)
    if names is None:
        raise error(at, f"{pattern!r} is not a pattern: write placeholders as {choices}")
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise error(at, f"unknown placeholder {{{unknown[0]}}}; choose from {choices}")


def fleet_from(block: Mapping[str, Any], backends: tuple[str, ...], line_of: Callable[[At], int],
               error: Callable[[At, str], Exception]) -> Fleet:
    """The ``fleet:`` block of a schema-valid file with its defaults filled in."""
    pop, load, expect = block["population"], block["load"], block["expect"]
    at = ("fleet", "population")
    ccs, per_cc = pop["cluster_controllers"], pop["libjoynr_per_cc"]
    if ccs * (1 + per_cc) > MAX_RUNTIMES:
        raise error((*at, "libjoynr_per_cc"),
                    f"{ccs} cluster controllers with {per_cc} libjoynr runtimes each are "
                    f"{ccs * (1 + per_cc)} runtimes; at most {MAX_RUNTIMES}")
    for gbid in pop["gbids"] or ():
        if gbid not in backends:
            raise error((*at, "gbids"), f"{gbid!r} is not one of the backends {', '.join(backends)}")
    providers, proxies = pop["providers"], pop["proxies"]
    if providers["per_cc"] >= per_cc:
        raise error((*at, "providers", "per_cc"), f"must be below libjoynr_per_cc ({per_cc}): the other "
                                                  f"libjoynr runtimes hold the proxies, got {providers['per_cc']}")
    _check_pattern(providers["participant_id"], PROVIDER_FIELDS, (*at, "providers", "participant_id"), error)
    _check_pattern(proxies["target"], TARGET_FIELDS, (*at, "proxies", "target"), error)
    waves = tuple(_wave(i, w, block["duration_s"], backends, ccs, line_of, error)
                  for i, w in enumerate(block["waves"]))
    for i in range(1, len(waves)):
        if waves[i].at_s < waves[i - 1].at_s:
            raise error(("fleet", "waves", i, "at_s"), f"waves come in order of at_s: {waves[i].at_s} is "
                                                       f"before the previous wave's {waves[i - 1].at_s}")
    given = {k: v for k, v in expect.items() if v is not None}
    if not given:
        raise error(("fleet", "expect"), "give at least one of lost, failed, answered_fraction")
    fleet = Fleet(
        cluster_controllers=ccs, libjoynr_per_cc=per_cc, gbids=tuple(pop["gbids"] or ()),
        providers_per_cc=providers["per_cc"], provider_id=providers["participant_id"],
        domain=providers["domain"], interface=providers["interface"], provider_scope=providers["scope"],
        target=proxies["target"], proxy_scope=proxies["scope"],
        calls_per_second_per_proxy=float(load["calls_per_second_per_proxy"]), method=load["method"],
        args=tuple(load["args"]), ttl_ms=load["ttl_ms"], duration_s=block["duration_s"], waves=waves,
        expect=given, line=line_of(("fleet",)),
        expect_lines={k: line_of(("fleet", "expect", k)) for k in given},
        population_line=line_of(("fleet", "population")), load_line=line_of(("fleet", "load")),
        broker_autosave=block.get("broker_autosave"),
    )
    _check_ids(fleet, error)
    return fleet


def _check_ids(fleet: Fleet, error: Callable[[At, str], Exception]) -> None:
    """Every provider id is an id and unique; every proxy's target is one of them."""
    at = ("fleet", "population", "providers", "participant_id")
    ids: set[str] = set()
    for cc in range(fleet.cluster_controllers):
        for i in range(fleet.providers_per_cc):
            pid = fleet.provider_participant(cc, i)
            if not _ID.match(pid):
                raise error(at, f"gives {pid!r} for cc {cc}, provider {i}: not a participant id")
            if pid in ids:
                raise error(at, f"gives {pid!r} twice (e.g. for cc {cc}, provider {i}): use {{cc}} and {{i}}")
            ids.add(pid)
    for cc in range(fleet.cluster_controllers):
        for i in range(fleet.proxies_per_cc):
            target = fleet.target_of(cc, i)
            if target not in ids:
                raise error(("fleet", "population", "proxies", "target"),
                            f"gives {target!r} for proxy {i} of cc {cc}, which no provider has "
                            f"(providers are {fleet.provider_id!r} for i below {fleet.providers_per_cc})")


def _wave(i: int, raw: Mapping[str, Any], duration_s: int, backends: tuple[str, ...], ccs: int,
          line_of: Callable[[At], int], error: Callable[[At, str], Exception]) -> Wave:
    at: At = ("fleet", "waves", i)
    if raw["at_s"] >= duration_s:
        raise error((*at, "at_s"), f"must be before duration_s ({duration_s}), got {raw['at_s']}")
    restart = crash = None
    if raw.get("restart") is not None:
        r = raw["restart"]
        if raw["at_s"] + r["over_s"] > duration_s:
            raise error((*at, "restart", "over_s"), f"the wave would end at {raw['at_s'] + r['over_s']} s, "
                                                    f"after duration_s ({duration_s})")
        restart = Restart(r["fraction"], r["over_s"], r["register_providers"])
        if math.ceil(r["fraction"] * ccs) < 1:  # pragma: no cover - fraction >= 0.001 and ccs >= 1
            raise error((*at, "restart", "fraction"), "restarts no cluster controller")
    if raw.get("crash_broker") is not None:
        c = raw["crash_broker"]
        if c["gbid"] not in backends:
            raise error((*at, "crash_broker", "gbid"), f"{c['gbid']!r} is not one of the backends "
                                                       f"{', '.join(backends)}")
        crash = BrokerCrash(c["gbid"], c.get("for_s"))
    dup = raw.get("duplicate_cc_ids")
    if dup is not None and dup > ccs:
        raise error((*at, "duplicate_cc_ids"), f"must be at most cluster_controllers ({ccs}), got {dup}")
    return Wave(index=i, at_s=raw["at_s"], line=line_of(at), restart=restart, crash_broker=crash,
                duplicate_cc_ids=dup)
