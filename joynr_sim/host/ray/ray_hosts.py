"""A run's host processes on a Ray cluster (``Simulation(hosts="ray")``, ``joynr-sim run
--hosts ray [--ray ADDRESS]``).

``RayHosts`` is the run's host pool, as ``process.HostPool`` is on this machine: one host
per CPU of the cluster, each a ``HostActor`` in its own one-CPU bundle of a placement group
that spreads the bundles over the nodes. A host taken is a ``RayHostProcess``: the same
handle as a local host process (``process.HostProcess``), whose child is started, signalled
and waited for through its actor. Ray reports a host that died (its actor's death, or the
host's) and the run traces every runtime it held as crashed (``on_lost``); closing kills
every actor and the placement group, also when the run was interrupted.

Ray is optional (``pip install 'joynr-sim[ray]'``) and connected once per process: to
``address`` (``ray start --head`` on one machine, ``ray start --address`` on the others),
else to a local instance started here on loopback, which ends with this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ...write_failure import Failures
from ..process.event_loop import event_loop_choice
from ..process.host_process import HostProcess
from .actor import TOKEN_BYTES, HostActor

PROBE_TIMEOUT_S = 5.0  # for the Ray address to accept a connection before Ray is asked to join it
READY_TIMEOUT_S = 60.0  # for the placement group's bundles to be reserved
LOOPBACK = "127.0.0.1"
SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"  # ray_constants.ENABLE_RAY_CLUSTER's switch


class RayUnavailable(Exception):
    """Ray is not installed, its address does not answer, or its cluster is too small: the
    run cannot be set up, and nothing was started."""


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise RayUnavailable("--hosts ray needs Ray: pip install 'joynr-sim[ray]'") from None
    return ray


@functools.cache
def _actor_class() -> Any:
    """``HostActor`` as a Ray actor class, made once: each ``ray.remote`` of the class
    would export its definition to the cluster again."""
    return _ray().remote(HostActor)


def connect(address: str | None = None) -> int:
    """Join the Ray cluster at ``address`` (host:port of its head; None: ``RAY_ADDRESS``, as
    Ray reads it), or start one on loopback when there is none and none is joined yet: the
    cluster's CPUs. An address that does not accept a connection within ``PROBE_TIMEOUT_S``
    is refused here, at once: Ray itself retries for minutes."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None and "ray" not in sys.modules:
        # On Linux Ray binds a node to the machine's address even when asked for loopback
        # (ray._private.services.resolve_ip_for_localhost); this switch, read once as Ray is
        # imported, keeps an instance that never leaves this machine on loopback.
        os.environ.setdefault(SINGLE_MACHINE, "0")
    ray = _ray()
    if not ray.is_initialized():
        if address is not None:
            _probe(address)
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            except Exception as exc:  # e.g. a cluster with token authentication, and no token here
                first = next((line.strip() for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
                raise RayUnavailable(f"--ray {address}: Ray did not connect: {first[:300]}") from None
        else:
            # Its processes ignore SIGINT, which they inherit: a Ctrl-C at the terminal reaches
            # the whole process group, and a Ray that died of it first took every host with
            # it, so the run failed its step (HostGone) instead of ending as interrupted. The
            # runner ends the actors itself and Ray ends with this process.
            with _sigint_ignored():
                # "local": a new instance, even where another one on this machine would be found
                ray.init(address="local", num_cpus=os.cpu_count() or 1, include_dashboard=False,
                         log_to_driver=False, logging_level=logging.ERROR)
    return int(ray.cluster_resources().get("CPU", 0))


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored in this process meanwhile (in the main thread only: elsewhere
    Python cannot change a handler, and nothing then reaches this process's handler)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def check_address(address: str) -> tuple[str, int]:
    """``--ray``: HOST:PORT of the Ray cluster's head (ValueError otherwise)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536 \
            or any(c.isspace() for c in host):
        raise ValueError(f"--ray: expected HOST:PORT of the Ray cluster's head, got {address[:80]!r}")
    return host, int(port)


def check_options(hosts: object, address: str | None, join: object, jobs: int) -> None:
    """``run``'s Ray options, before anything starts (ValueError: a bad option)."""
    if address is not None:
        if hosts != "ray":
            raise ValueError("--ray: the Ray cluster places the hosts only with --hosts ray")
        check_address(address)
    if hosts == "ray" and (join or jobs != 1):
        raise ValueError("--hosts ray: each run takes every CPU of the Ray cluster (no --join, no --jobs)")


def joined(address: str | None) -> str | None:
    """Ray joined at ``address`` (or started on loopback) before anything else starts: None,
    or why it cannot be, in one line."""
    try:
        connect(address)
    except RayUnavailable as exc:
        return str(exc)
    return None


def _probe(address: str) -> None:
    try:
        host, port = check_address(address)
    except ValueError as exc:
        raise RayUnavailable(str(exc)) from None
    try:
        socket.create_connection((host, port), PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise RayUnavailable(f"--ray {address}: no Ray cluster answers there ({exc.strerror or exc})") from None


def enough(cpus: int, wanted: int, what: str) -> None:
    """Refuses a cluster with fewer CPUs than ``wanted`` hosts, with the numbers."""
    if wanted > cpus:
        raise RayUnavailable(f"--hosts ray: {what} needs {wanted} host processes, one per CPU, and the Ray "
                             f"cluster has {cpus} CPU{'s' if cpus != 1 else ''}")


class RayHosts:
    def __init__(self, log_dir: Path, address: str | None = None, failures: Failures | None = None) -> None:
        event_loop_choice()  # a wrong JOYNR_SIM_EVENT_LOOP is the caller's error, not a host that dies
        self.cpus = connect(address)
        if self.cpus < 1:
            raise RayUnavailable("--hosts ray: the Ray cluster has no CPU to place a host on")
        # Nodes on other machines than this one: they reach no broker or fault proxy on loopback.
        ray = _ray()
        here = {LOOPBACK, ray.util.get_node_ip_address()}
        self.elsewhere = sorted({n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")} - here)
        self.log_dir = log_dir
        self.failures = failures
        self.on_lost: Callable[[HostProcess], None] | None = None
        self._group: Any = None  # the placement group, made when the first host is taken
        self._actors: set[Any] = set()
        self._bundles: dict[str, int] = {}  # host name -> its bundle

    def fill(self) -> None:
        """Nothing ahead: a host's bundle is known only when it is taken."""

    async def _placement_group(self) -> Any:
        if self._group is None:
            from ray.util.placement_group import placement_group

            group = placement_group([{"CPU": 1}] * self.cpus, strategy="SPREAD")
            self._group = group
            try:
                await asyncio.wait_for(asyncio.wrap_future(group.ready().future()), READY_TIMEOUT_S)
            except TimeoutError:
                raise RayUnavailable(f"--hosts ray: the Ray cluster did not reserve {self.cpus} CPUs for the "
                                     f"hosts within {READY_TIMEOUT_S:g} s (another job holds them?)") from None
        return self._group

    async def take(self, name: str) -> RayHostProcess:
        """A new host on the bundle of ``name`` (a group's host takes the same bundle again)."""
        bundle = self._bundles.setdefault(name, len(self._bundles) % self.cpus)
        group = await self._placement_group()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        actor = _actor_class().options(
            num_cpus=1, max_concurrency=4,
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=bundle),
        ).remote()
        self._actors.add(actor)
        host = RayHostProcess(name, self.log_dir, actor, self)
        host.failures = self.failures
        host.on_lost = self.on_lost
        await host.spawn()
        return host

    def forget(self, actor: Any) -> None:
        """The actor's host ended: the actor goes, and its bundle's CPU with it."""
        if actor in self._actors:
            self._actors.discard(actor)
            _ray().kill(actor, no_restart=True)

    async def close(self) -> None:
        """Every actor killed (its host dies with it) and the placement group removed."""
        ray = _ray()
        for actor in list(self._actors):
            self.forget(actor)
        if self._group is not None:
            from ray.util.placement_group import remove_placement_group

            group, self._group = self._group, None
            if ray.is_initialized():
                remove_placement_group(group)


class RayChild:
    """A host started by its actor, seen as ``process.children.Child``: its end is the
    actor's answer to ``wait`` (or the actor's death, which ended the host with it)."""

    def __init__(self, actor: Any, pid: int, hosts: RayHosts) -> None:
        self.pid: int | None = pid
        self.exitcode: int | None = None
        self._actor, self._hosts = actor, hosts
        self._ended = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        try:
            self.exitcode = await self._actor.wait.remote()
        except Exception:  # the actor died (its worker killed, its node gone): the host with it
            self.exitcode = -9
        finally:
            self._hosts.forget(self._actor)

    def alive(self) -> bool:
        return not self._ended.done()

    async def wait(self) -> None:
        await asyncio.shield(self._ended)


class RayHostProcess(HostProcess):
    def __init__(self, name: str, log_dir: Path, actor: Any, hosts: RayHosts) -> None:
        super().__init__(name, log_dir)
        self._actor, self._hosts = actor, hosts

    async def _start_child(self) -> tuple[socket.socket, socket.socket]:
        """The actor listens on its node; the runner connects both channels and proves
        itself with a token; the actor starts the host on them."""
        place = await self._actor.listen.remote()
        token = secrets.token_bytes(TOKEN_BYTES)
        started = self._actor.start.remote(token, str(self.log_dir), self.event_loop)
        channels: list[socket.socket] = []
        try:
            for port in place["ports"]:
                channel = await asyncio.to_thread(socket.create_connection, (place["address"], port), PROBE_TIMEOUT_S)
                channels.append(channel)
                channel.sendall(token)
            self.pid = await started
        except BaseException:
            for channel in channels:
                channel.close()
            self._hosts.forget(self._actor)
            raise
        self.address = place["address"]  # its cluster controllers listen for WebSockets on its node
        self.actor_pid: int = place["actor_pid"]  # the Ray worker process the actor runs in
        self.node: str = place["node"]  # the Ray node it was placed on
        self._child = RayChild(self._actor, self.pid, self._hosts)
        self.log_path = self.log_dir / f"host-{self.pid}.log"
        return channels[0], channels[1]

    def _signal(self, sig: int) -> None:
        self._ending = True
        if self.alive:
            self._actor.signal.remote(sig)
