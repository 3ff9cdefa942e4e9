"""The runtime API is defined once: ``joynr_sim.runtime.handle`` says what a runtime is to
whoever holds it, ``joynr_sim.host.rpc.ops`` the control protocol's ops, one struct each.
These tests hold the rest to them: every op has its one handler in a host and a method of
the runner that asks it; every method of the contract is an op (or what the host process
does itself); the runtimes in this process and the runner's handles on runtimes in host
processes both keep the contract, every operation a coroutine. Nothing here starts anything."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest

import joynr_sim.host
from joynr_sim.clock import SimClock
from joynr_sim.core.address import WebSocketAddress
from joynr_sim.host.join.ops import SUPERVISOR_OPS
from joynr_sim.host.join.supervisor import Supervisor
from joynr_sim.host.rpc import ops
from joynr_sim.host.rpc.dispatch import Host
from joynr_sim.host.rpc.kinds import RemoteClusterController, RemoteLibjoynr
from joynr_sim.host.rpc.remote_views import RemoteProxy
from joynr_sim.runtime.cluster_controller import ClusterController
from joynr_sim.runtime.handle import ClusterControllerHandle, ProxyHandle, RuntimeHandle
from joynr_sim.runtime.joynr_runtime import Proxy
from joynr_sim.runtime.libjoynr import LibjoynrRuntime
from joynr_sim.runtime.participants import ProxySkeleton

CONTRACTS = (RuntimeHandle, ClusterControllerHandle, ProxyHandle)


def methods(protocol: type) -> dict[str, inspect.Signature]:
    """A protocol's operations (its data members and properties are no operations)."""
    return {name: inspect.signature(fn) for name, fn in inspect.getmembers(protocol, inspect.isfunction)
            if not name.startswith("_")}


def askers() -> dict[type[ops.Op], list[str]]:
    """Every method of joynr_sim.host marked ``@asks``: op -> where it is asked."""
    found: dict[type[ops.Op], list[str]] = {}
    for module_info in pkgutil.walk_packages(joynr_sim.host.__path__, "joynr_sim.host."):
        if module_info.name.endswith("__main__"):
            continue
        module = importlib.import_module(module_info.name)
        for cls in vars(module).values():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            for name, member in vars(cls).items():
                fn = member.fget if isinstance(member, property) else member
                for op in getattr(fn, "asks", ()):
                    found.setdefault(op, []).append(f"{cls.__name__}.{name}")
    return found


# -- ops, handlers, askers -------------------------------------------------------------------

def test_every_op_struct_is_registered_under_its_tag():
    structs = {cls for cls in vars(ops).values()
               if inspect.isclass(cls) and issubclass(cls, ops.Op) and cls not in (ops.Op, ops.RuntimeOp)}
    assert structs == set(ops.OPS.values())
    assert all(ops.name_of(op) == name for name, op in ops.OPS.items())
    assert ops.QUERY_OPS == {name for name, op in ops.OPS.items() if op.query}


def test_every_op_has_exactly_one_handler_in_the_host():
    handlers = {name.removeprefix("on_") for name, fn in inspect.getmembers(Host, inspect.isfunction)
                if name.startswith("on_")}
    assert handlers == set(ops.OPS), "one on_<op> per op, and no handler without an op"
    for name in ops.OPS:
        assert inspect.iscoroutinefunction(getattr(Host, f"on_{name}")), name


def test_every_op_of_a_joined_host_has_its_handler_in_the_supervisor():
    handlers = {name.removeprefix("on_") for name, fn in inspect.getmembers(Supervisor, inspect.isfunction)
                if name.startswith("on_")}
    assert handlers == set(SUPERVISOR_OPS)


def test_every_op_is_asked_by_a_method_of_the_runner():
    every = {*ops.OPS.values(), *SUPERVISOR_OPS.values()}
    asked = askers()
    assert every <= set(asked), sorted(ops.name_of(op) for op in every - set(asked))
    assert set(asked) <= every


# -- the contract --------------------------------------------------------------------------

def test_every_operation_of_the_contract_is_an_op_or_the_processs_own():
    for protocol in CONTRACTS:
        for name in methods(protocol):
            if name in ops.BY_THE_PROCESS:
                assert name not in ops.OPS
                continue
            assert ops.ASKED_AS.get(name, name) in ops.OPS, f"{protocol.__name__}.{name} is no op"


@pytest.fixture
def runtimes(tmp_path: Path):
    """A runtime of each kind in this process, a handle of each kind on one in a host (none
    started), and a proxy of each."""
    common = dict(run_dir=tmp_path, run_id="r", clock=SimClock())
    address = WebSocketAddress("WS", "127.0.0.1", 1, "/")
    cc = ClusterController("cc1", ["gbid1"], brokers=None, **common)
    app = LibjoynrRuntime("app1", "cc1", address, **common)
    remote_cc = RemoteClusterController("cc2", ["gbid1"], brokers=None, **common)
    remote_app = RemoteLibjoynr("app2", "cc2", address, **common)
    proxies = [Proxy(app, ProxySkeleton("p", "joynrsim/Echo", "q")), RemoteProxy(remote_app, "p", "q")]
    yield [cc, app, remote_cc, remote_app], proxies
    for runtime in (cc, app):
        runtime.close()


def test_the_runtimes_here_and_the_handles_on_runtimes_in_hosts_keep_the_contract(runtimes):
    found, proxies = runtimes
    for runtime in found:
        contracts = [RuntimeHandle] + ([ClusterControllerHandle] if runtime.kind == "cluster-controller" else [])
        for protocol in contracts:
            assert isinstance(runtime, protocol), (type(runtime).__name__, protocol.__name__)
            for name in methods(protocol):
                assert inspect.iscoroutinefunction(getattr(runtime, name)), f"{type(runtime).__name__}.{name}"
    for proxy in proxies:
        assert isinstance(proxy, ProxyHandle), type(proxy).__name__
        for name in methods(ProxyHandle):
            assert inspect.iscoroutinefunction(getattr(proxy, name)), f"{type(proxy).__name__}.{name}"


def test_each_operation_takes_the_contracts_parameters(runtimes):
    found, proxies = runtimes
    for holder in [*found, *proxies]:
        for protocol in CONTRACTS:
            if not isinstance(holder, protocol):
                continue
            for name, signature in methods(protocol).items():
                wanted = [(p.name, p.kind) for p in signature.parameters.values() if p.name != "self"]
                got = [(p.name, p.kind) for p in inspect.signature(getattr(holder, name)).parameters.values()]
                assert got == wanted, f"{type(holder).__name__}.{name}{got} against {protocol.__name__}"
