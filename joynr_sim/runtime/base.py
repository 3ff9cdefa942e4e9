"""What every runtime shares: its lifecycle (start, stop, crash, restart) and carrying out what
its node (``joynr_sim.core.node``) decides — the node decides, the runtime only does.

A runtime is composed, not specialised: a node of its kind, the ports that carry its
messages (``ports``: a registry of carriers by address type, as joynr's messaging-stub
factory), the directory it asks about participants (``ports.Directory``) and the
dispatcher that hands what was delivered to its own providers and proxies
(``dispatcher``). ``carry_out`` writes the trace event of each action (``action_trace``:
the one place) and then does what the action says.

A runtime runs on one asyncio loop. Its in-memory state (node, dispatcher, subscriptions)
is created anew by a crash; only what joynr persists survives: the runtime's ids and the
fixed participant ids of its providers, which a scenario re-registers after a restart.
"""

from __future__ import annotations

import asyncio
import random
import traceback
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from ..clock import SimClock
from ..core.actions import ACTIONS, Action, Deliver, Drop, Reject, Resolve, Send, Subscribe, Unsubscribe
from ..core.address import InProcessAddress
from ..core.errors import SubscriptionException
from ..core.fairness import DEFAULT_MAX_LOOKUPS_PER_SENDER
from ..core.limits import DEFAULT_MAX_FRAME_BYTES, WireLimits, shorten
from ..core.message import JoynrMessage
from ..core.multicast import MulticastError, MulticastId
from ..core.node import DEFAULT_MAX_HOPS, DEFAULT_MAX_QUEUED, DEFAULT_MAX_QUEUED_BYTES, Node
from ..core.routing import PutResult, RoutingEntry, RoutingTable
from ..trace import TraceWriter
from ..wire.codecs import DEFAULT_WIRE, codec
from .action_trace import EVENT_OF
from .dispatcher import Dispatcher
from .participants import ProviderRuntimeException
from .ports import Carrier, Directory, Network, Port
from .subscriptions import Subscriptions

DEFAULT_TTL_MS = 60_000
# Routing entries made by registration and provisioning live as long as the runtime.
FOREVER_MS = 2**62


class Runtime:
    kind: str  # cluster-controller | libjoynr | gcd

    def __init__(
        self,
        runtime_id: str,
        *,
        node: Callable[[Mapping[str, Any]], Node],
        directory: Directory,
        run_dir: str | Path,
        run_id: str,
        clock: SimClock,
        policy: str = "precedence",
        max_hops: int = DEFAULT_MAX_HOPS,
        max_queued: int = DEFAULT_MAX_QUEUED,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        max_queued_per_sender: int | None = None,
        max_lookups_per_sender: int = DEFAULT_MAX_LOOKUPS_PER_SENDER,
        max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
        purge_interval_ms: int = 1000,
        seed: int | None = None,
        incarnation: int = 0,
        network: Network | None = None,
        wire: str = DEFAULT_WIRE,
    ) -> None:
        self.runtime_id = runtime_id
        # The bytes its messages travel in (joynr_sim.wire.codecs): every frame it sends is
        # encoded, every frame it takes decoded, by the one codec.
        self.codec = codec(wire)
        self.wire = wire
        # Where its ports' connections come from; None: the real network's sockets.
        self.network = network
        # The node's bounds: hops, what may wait for a route (in all and per sender),
        # lookups per sender, the largest frame; its rule set by name or as an object.
        self._new_node = node
        self.node_options: dict[str, Any] = dict(
            policy=policy, max_hops=max_hops, max_queued=max_queued, max_queued_bytes=max_queued_bytes,
            max_queued_per_sender=max_queued_per_sender, max_lookups_per_sender=max_lookups_per_sender,
            limits=WireLimits(max_frame_bytes=max_frame_bytes), decode=self.codec.decode_for_routing,
            read_payload=self.codec.read_payload,
        )
        self.directory = directory
        # Generated participant ids: reproducible when the run has a seed. A runtime started
        # again in a new process (incarnation n) must not hand out its predecessor's ids.
        self.ids = random.Random(None if seed is None else f"{seed}:{runtime_id}" + (
            f":{incarnation}" if incarnation else ""))
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.clock = clock
        self.policy = policy
        self.max_hops = max_hops
        self.purge_interval_ms = purge_interval_ms
        # The trace tells the run's time: a runtime's skewed clock (RuntimeClock) is its own.
        self.trace = TraceWriter(self.run_dir, run_id, runtime_id, self.kind, getattr(clock, "base", clock),
                                 batched=True)
        if hasattr(clock, "base"):
            self.trace.decision_clock = clock.now_ms
        self.ports: list[Port] = []  # started in this order, stopped in the reverse
        self._carriers: dict[type, Carrier] = {}  # by address type, from the ports at each start
        self.life_fields: dict[str, Any] = {}  # what life.start says of this runtime
        # Only a cluster controller subscribes multicast topics on a backend (its MQTT port).
        self.multicast_topic: Callable[[str, str, bool], None] = _no_topics(f"{runtime_id}: a {self.kind} runtime")
        self.running = False
        # Its tasks in the order they were spawned (a dict, not a set of objects hashed by
        # address): a halt cancels them in that order, the same in every run of a seed.
        self._tasks: dict[asyncio.Task, None] = {}
        self._life = 0  # one more at every halt: what was scheduled before it does not run
        # What carry_out does per action type: the trace event it writes (action_trace), then
        # its effect.
        effects: dict[type, Callable[[Any], None]] = {
            Send: self._transmit,
            Deliver: lambda a: self.dispatcher.dispatch(a.msg, a.recipient),
            Resolve: lambda a: self.spawn(self._resolving(a.participant_id)),
            Reject: lambda a: self.dispatcher.reply(a.msg, None,
                                                    ProviderRuntimeException(f"not permitted: {a.detail}")),
            Subscribe: lambda a: self.multicast_topic(a.gbid, a.topic, True),
            Unsubscribe: lambda a: self.multicast_topic(a.gbid, a.topic, False),
        }
        self._on_action = {kind: (EVENT_OF.get(kind), effects.get(kind)) for kind in ACTIONS}
        self._reset()

    def _reset(self) -> None:
        """The state a crash loses, new: the node, the dispatcher and its subscriptions."""
        self.node = self._new_node(self.node_options)
        self.table.add_listener(self.trace.routing_listener)
        self.dispatcher = Dispatcher(self.route, self.spawn, self.soon, Subscriptions(
            self, self.add_multicast_receiver, self.remove_multicast_receiver))
        for port in self.ports:
            port.reset()

    @property
    def table(self) -> RoutingTable:
        return self.node.table

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        if self.running:
            raise RuntimeError(f"runtime {self.runtime_id!r} is already running")
        self._loop = asyncio.get_running_loop()
        # Running from the first accepted connection on: what arrives while the other
        # ports come up is routed or queued, never ignored.
        self.running = True
        # The carrier of each address type, from the ports (joynr's messaging-stub factory).
        self._carriers = {t: carry for port in self.ports for t, carry in port.carriers.items()}
        self._unsubscribe_clock = self.clock.on_advance(self._clock_moved)
        try:
            for port in self.ports:
                await port.start()
        except BaseException:
            self._halt()
            for port in reversed(self.ports):
                await port.abort()
            raise
        self.spawn(self._tick_periodically())
        self.emit("life.start", target=self.runtime_id, target_kind=self.kind, **self.life_fields)

    async def stop(self) -> None:
        """Graceful: unregister what was registered, finish what was taken on, then close
        connections politely."""
        if not self.running:
            return
        for pid in list(self.dispatcher.providers):
            await self.unregister_provider(pid)
        for port in reversed(self.ports):  # the input stops before the output drains
            await port.drain()
        self.carry_out(self.node.closing())  # what was counted, not traced, is said
        self._halt()
        for port in reversed(self.ports):
            await port.stop()
        self.emit("life.stop", target=self.runtime_id, target_kind=self.kind)

    async def crash(self) -> None:
        """Abrupt: connections die without goodbye, in-memory state is gone."""
        if not self.running:
            return
        self._halt()
        for port in reversed(self.ports):
            await port.abort()
        self.emit("life.crash", target=self.runtime_id, target_kind=self.kind)
        self._reset()

    async def restart(self) -> None:
        """Same ids, fresh memory (providers re-register themselves, as in joynr)."""
        if self.running:
            await self.crash()
        self._reset()
        self.emit("life.restart", target=self.runtime_id, target_kind=self.kind)
        await self.start()

    def close(self) -> None:
        """Release files once the runtime is stopped for good."""
        self.trace.close()
        for port in self.ports:
            port.close()

    def _halt(self) -> None:
        self.running = False
        self._life += 1
        self.dispatcher.subscriptions.arm()  # not running: the timer is cancelled
        self._unsubscribe_clock()
        for task in list(self._tasks):
            task.cancel()
        self.dispatcher.fail_waiting("runtime went down")

    def spawn(self, coro) -> asyncio.Task:
        """Run a coroutine for as long as this runtime runs (a crash cancels it)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks[task] = None
        task.add_done_callback(lambda done: self._tasks.pop(done, None))
        return task

    def soon(self, callback: Callable[..., None], *args: Any) -> None:
        """Run callback where a task spawned now would take its first step (after what is
        already scheduled, such as this turn's trace write), unless this runtime halts
        first, as a spawned task would be cancelled; a handle costs far less than a task."""
        asyncio.get_running_loop().call_soon(_in_same_life, self, self._life, callback, args)

    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        return self.trace.emit(ev, **fields)

    # -- carrying out the node's decisions ---------------------------------------------
    def carry_out(self, actions: Iterable[Action]) -> None:
        # One lookup per action by its exact type (the actions are final dataclasses), not a
        # chain of isinstance tests: the fleet's profile counted five a call.
        trace, on_action = self.trace, self._on_action
        for action in actions:
            try:
                write, effect = on_action[type(action)]
            except KeyError:
                raise TypeError(f"unknown action {action!r}") from None
            if write is not None:
                write(trace, action)
            if effect is not None:
                effect(action)

    def _transmit(self, action: Send) -> None:
        address = action.address
        if type(address) is InProcessAddress:
            return  # the Deliver or Drop that follows says what happened
        carry = self._carriers.get(type(address))
        if carry is None:
            self.carry_out(self.node.send_failed(action.msg, address))
        else:
            carry(action.msg, address)

    async def _resolving(self, participant_id: str) -> None:
        try:
            await self.directory.resolve(participant_id)
        finally:
            self.node.resolved(participant_id)

    def receive_frame(self, data: bytes | str, via: str, gbid: str | None = None, source: str | None = None) -> None:
        """A frame from the network: the node decodes and routes it in one call."""
        if not self.running:
            return
        try:
            self.carry_out(self.node.receive_frame(data, via, gbid, source))
        except Exception as exc:  # a bug must not deafen the connection that hit it
            self.internal_error(exc, data, via, gbid)

    def route(self, msg: JoynrMessage, gbid: str | None = None) -> None:
        """A message of one of this runtime's own participants."""
        self.carry_out(self.node.route(msg, gbid))

    def tick(self, now_ms: int | None = None) -> None:
        """Drop expired waiting messages, purge expired routing entries, publish what is due."""
        if not self.running:
            return
        now = self.clock.now_ms() if now_ms is None else now_ms
        self.carry_out(self.node.tick(now))
        self.dispatcher.subscriptions.tick(now, self.dispatcher.attribute_values)
        for port in self.ports:
            port.tick(now)

    def _clock_moved(self, now_ms: int) -> None:
        """Expire at once when the scenario moves time, from whichever thread moved it."""
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self.tick(now_ms)
        else:
            self._loop.call_soon_threadsafe(self.tick, now_ms)

    async def _tick_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.purge_interval_ms / 1000)
            self.tick()

    # -- failures --------------------------------------------------------------------
    def log_failure(self, what: str, exc: BaseException) -> None:
        """What failed, with its traceback, in ``<run dir>/log/<runtime id>.log``."""
        log = self.run_dir / "log" / f"{self.runtime_id}.log"
        try:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"-- ts {self.clock.now_ms()} {what}\n")
                f.write("".join(traceback.format_exception(exc)))
        except OSError:
            pass  # the caller's trace event, if any, still says what happened

    def internal_error(self, exc: BaseException, data: bytes | str, via: str, gbid: str | None) -> None:
        """Handling a frame raised: its message (decoded again to name it: decoding is pure)
        is dropped with reason ``internal-error``, the traceback goes to
        ``<run dir>/log/<runtime id>.log``, and the runtime keeps serving."""
        try:
            msg = self.node.decode(data, via, gbid)
        except Exception:
            msg = None
        msg = msg if isinstance(msg, JoynrMessage) else None
        self.log_failure(f"message {msg.id if msg else None}", exc)
        self.carry_out([Drop(msg, "internal-error", via=via, gbid=gbid,
                             detail=shorten(f"{type(exc).__name__}: {exc}", 200))])

    # -- participants the node delivers to -------------------------------------------
    async def unregister_provider(self, participant_id: str) -> None:
        skeleton = self.dispatcher.providers.pop(participant_id, None)
        if skeleton is None:
            raise KeyError(f"participant_id: no provider {participant_id!r} in {self.runtime_id}")
        self.dispatcher.subscriptions.detach(participant_id, skeleton.implementation)
        await self.directory.discovery_remove(participant_id)
        self.node.remove_next_hop(participant_id)
        await self.directory.withdraw(participant_id)

    async def add_multicast_receiver(self, mid: MulticastId, receiver: str) -> None:
        """joynr's addMulticastReceiver: ``receiver`` gets what the provider fires to ``mid``.
        A provider this runtime has no route to is looked for first; a libjoynr runtime
        tells its cluster controller, which subscribes the multicast's topic when the
        provider is behind another cluster controller."""
        if self.table.lookup(mid.provider) is None:
            await self.directory.resolve(mid.provider)
        try:
            actions = self.node.router.multicast.add_receiver(mid, receiver)
        except MulticastError as exc:
            raise SubscriptionException(str(exc)) from None
        topics = [f"{a.gbid}/{a.topic}" for a in actions if isinstance(a, Subscribe)]
        self.emit("mc.receiver", op="add", multicast=str(mid), receiver=receiver, topics=topics)
        self.carry_out(actions)
        try:
            await self.directory.multicast_receiver(mid, receiver, True)
        except BaseException:
            self.carry_out(self.node.router.multicast.remove_receiver(mid, receiver))
            raise

    async def remove_multicast_receiver(self, mid: MulticastId, receiver: str) -> None:
        actions = self.node.router.multicast.remove_receiver(mid, receiver)
        topics = [f"{a.gbid}/{a.topic}" for a in actions if isinstance(a, Unsubscribe)]
        self.emit("mc.receiver", op="remove", multicast=str(mid), receiver=receiver, topics=topics)
        self.carry_out(actions)
        await self.directory.multicast_receiver(mid, receiver, False)


def _in_same_life(runtime: Runtime, life: int, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
    if life == runtime._life:
        callback(*args)


def _no_topics(who: str) -> Callable[[str, str, bool], None]:
    def refuse(gbid: str, topic: str, subscribe: bool) -> None:
        raise TypeError(f"{who} subscribes no MQTT topic")
    return refuse


def offer_route(runtime: Runtime, participant_id: str, entry: RoutingEntry, origin: str) -> PutResult:
    """Offer a route to the runtime's node (its add_next_hop): what waited for it goes now."""
    result, waiting = runtime.node.add_next_hop(participant_id, entry, origin)
    runtime.carry_out(waiting)
    return result
