"""What every runtime shares: the lifecycle (start, stop, crash, restart), the trace, and
carrying out what its message router (``joynr_sim.core.router``) decides — the router
decides, the runtime only does: it records, transmits, delivers and asks.

A runtime runs on one asyncio loop. Its in-memory state (router with its routing table and
queue, pending calls) is created by ``start`` and thrown away by ``crash``; only what joynr
persists survives: the runtime's ids and the fixed participant ids of its providers, which
a scenario re-registers after a restart.

Longer than 400 lines because ``Runtime`` is the one object an application programs
against — lifecycle, providers, proxies and calls — and carrying out the router's actions
is what connects them; split across files it would be one class read in three places.
"""

from __future__ import annotations

import asyncio
import random
import traceback
import types
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from ..clock import SimClock
from ..core.actions import (
    Action,
    Deliver,
    Drop,
    LearnRoute,
    Queue,
    Received,
    Reject,
    Resolve,
    Send,
    Subscribe,
    Unsubscribe,
    Withhold,
)
from ..core.address import Address, InProcessAddress, describe, type_name
from ..core.discovery import (
    DEFAULT_EXPIRY_MS,
    DiscoveryEntry,
    DiscoveryEntryWithMetaInfo,
    DiscoveryScope,
    ProviderQos,
    Version,
)
from ..core.fairness import DEFAULT_MAX_LOOKUPS_PER_SENDER
from ..core.limits import DEFAULT_MAX_FRAME_BYTES, WireLimits, shorten
from ..core.message import ONE_WAY, REPLY, REQUEST, JoynrMessage
from ..core.multicast import MulticastError, MulticastId
from ..core.router import DEFAULT_MAX_HOPS, DEFAULT_MAX_QUEUED, DEFAULT_MAX_QUEUED_BYTES, MessageRouter
from ..core.routing import PutResult, RoutingEntry, RoutingTable
from ..core.subscriptions import SubscriptionQos
from ..trace import TraceWriter
from .participants import (
    REQUEST_REPLY_ID,
    JoynrRuntimeException,
    JoynrTimeoutException,
    MethodInvocationException,
    ProviderRuntimeException,
    ProviderSkeleton,
    ProxySkeleton,
    broadcast_kind,
    decode_reply,
    decode_request,
    encode_reply,
    encode_request,
)
from .subscriptions import Subscription, SubscriptionException, Subscriptions

DEFAULT_TTL_MS = 60_000
# Routing entries made by registration and provisioning live as long as the runtime.
FOREVER_MS = 2**62


class DiscoveryException(JoynrRuntimeException):
    """A lookup found no provider (joynr's DiscoveryException)."""


class Runtime:
    kind: str  # cluster-controller | libjoynr | gcd

    def __init__(
        self,
        runtime_id: str,
        *,
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
    ) -> None:
        self.runtime_id = runtime_id
        # The bounds of the router: hops, what may wait for a route (in all and per sender),
        # lookups per sender, the largest frame.
        self.router_options: dict[str, Any] = dict(
            max_hops=max_hops, max_queued=max_queued, max_queued_bytes=max_queued_bytes,
            max_queued_per_sender=max_queued_per_sender, max_lookups_per_sender=max_lookups_per_sender,
            limits=WireLimits(max_frame_bytes=max_frame_bytes),
        )
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
        self.trace = TraceWriter(self.run_dir, run_id, runtime_id, self.kind, clock, batched=True)
        self.running = False
        self._tasks: set[asyncio.Task] = set()
        self._life = 0  # one more at every halt: what was scheduled before it does not run
        self._reset_state()

    # -- state that a crash loses ------------------------------------------------------
    def _reset_state(self) -> None:
        self.router = self._make_router()
        self.table.add_listener(self.trace.routing_listener)
        self._pending: dict[str, asyncio.Future] = {}
        self.providers: dict[str, ProviderSkeleton] = {}
        self.proxies: dict[str, ProxySkeleton] = {}
        self.subscriptions = Subscriptions(self, self.add_multicast_receiver, self.remove_multicast_receiver)
        self._on_reset()

    @property
    def table(self) -> RoutingTable:
        return self.router.table

    def _on_reset(self) -> None:
        """Subclasses drop their own in-memory state here."""

    def _make_router(self) -> MessageRouter:
        raise NotImplementedError

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        if self.running:
            raise RuntimeError(f"runtime {self.runtime_id!r} is already running")
        self._loop = asyncio.get_running_loop()
        # Running from the first accepted connection on: what arrives while the other
        # transports come up is routed or queued, never ignored.
        self.running = True
        self._unsubscribe_clock = self.clock.on_advance(self._on_clock_advance)
        try:
            await self._start_transports()
        except BaseException:
            self._halt()
            await self._abort_transports()
            raise
        self._on_started()
        self._spawn(self._purge_periodically())
        self.emit("life.start", target=self.runtime_id, target_kind=self.kind, **self._life_fields())

    async def stop(self) -> None:
        """Graceful: unregister what was registered, then close connections politely."""
        if not self.running:
            return
        for pid in list(self.providers):
            await self.unregister_provider(pid)
        await self._drain()
        self.carry_out(self.router.shares.flush())  # what was counted, not traced, is said
        self._halt()
        await self._stop_transports()
        self.emit("life.stop", target=self.runtime_id, target_kind=self.kind)

    async def crash(self) -> None:
        """Abrupt: connections die without goodbye, in-memory state is gone."""
        if not self.running:
            return
        self._halt()
        await self._abort_transports()
        self.emit("life.crash", target=self.runtime_id, target_kind=self.kind)
        self._reset_state()

    async def restart(self) -> None:
        """Same ids, fresh memory (providers re-register themselves, as in joynr)."""
        if self.running:
            await self.crash()
        self._reset_state()
        self.emit("life.restart", target=self.runtime_id, target_kind=self.kind)
        await self.start()

    def _on_clock_advance(self, now_ms: int) -> None:
        """Expire at once when the scenario moves time, from whichever thread moved it."""
        try:
            on_loop = asyncio.get_running_loop() is self._loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            self.purge(now_ms)
        else:
            self._loop.call_soon_threadsafe(self.purge, now_ms)

    def close(self) -> None:
        """Release files once the runtime is stopped for good."""
        self.trace.close()

    def _halt(self) -> None:
        self.running = False
        self._life += 1
        self.subscriptions.arm()  # not running: the timer is cancelled
        self._unsubscribe_clock()
        for task in list(self._tasks):
            task.cancel()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(JoynrTimeoutException("runtime went down"))
        self._pending.clear()

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _soon(self, callback: Callable[..., None], *args: Any) -> None:
        """Run callback where a task spawned now would take its first step (after what is
        already scheduled, such as this turn's trace write), unless this runtime halts
        first, as a spawned task would be cancelled; a handle costs far less than a task."""
        asyncio.get_running_loop().call_soon(self._in_same_life, self._life, callback, args)

    def _in_same_life(self, life: int, callback: Callable[..., None], args: tuple[Any, ...]) -> None:
        if life == self._life:
            callback(*args)

    def spawn(self, coro) -> asyncio.Task:
        """Run a coroutine for as long as this runtime runs (a crash cancels it)."""
        return self._spawn(coro)

    def _life_fields(self) -> dict[str, Any]:
        return {}

    def _on_started(self) -> None:
        """Connections are up: start what runs in the background."""

    async def _start_transports(self) -> None:
        raise NotImplementedError

    async def _drain(self) -> None:
        """A graceful stop, still running: finish what was taken on, where it can."""

    async def _stop_transports(self) -> None:
        raise NotImplementedError

    async def _abort_transports(self) -> None:
        raise NotImplementedError

    # -- the trace -------------------------------------------------------------------
    def emit(self, ev: str, **fields: Any) -> dict[str, Any]:
        return self.trace.emit(ev, **fields)

    def trace_msg(self, ev: str, msg: JoynrMessage | None, sender: str | None = None, **extra: Any) -> None:
        """``sender``: for an event of no one message (a count of a sender's messages), its ``from``."""
        if msg is None:
            fields = {"msg": None, "type": None, "from": sender, "to": None, "hops": None, "corr": None,
                      "exp": None}
        else:
            fields = {
                "msg": msg.id,
                "type": msg.type,
                "from": msg.sender,
                "to": msg.recipient,
                "hops": msg.hops,
                "corr": msg.header(REQUEST_REPLY_ID),
                "exp": msg.expiry_date_ms,  # what a check needs to know whether it could still arrive
            }
        self.trace.emit(ev, **fields, **extra)

    # -- carrying out the router's decisions ---------------------------------------------
    _on_action: dict[type, Callable[[Any, Any], None]]  # per class: _action_table
    # joynr's messaging-stub factory: the type of the address a Send goes to names the
    # method that carries it there, per kind (an InProcess one needs none: a Deliver
    # follows). A Send to a type without one fails as no-connection.
    transports: ClassVar[dict[type[Address], str]] = {}
    _carriers: dict[type[Address], Callable[[Any, JoynrMessage, Any], None]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._on_action = _action_table(cls)
        cls._carriers = {address_type: getattr(cls, name) for address_type, name in cls.transports.items()}

    def carry_out(self, actions: Iterable[Action]) -> None:
        # One dict lookup by the action's exact type (the actions are final dataclasses),
        # not a chain of isinstance tests: the fleet's profile counted five a call.
        on_action = self._on_action
        for action in actions:
            handler = on_action.get(type(action))
            if handler is None:
                raise TypeError(f"unknown router action {action!r}")
            handler(self, action)

    def _on_send(self, action: Send) -> None:
        self.trace_msg(
            "msg.out", action.msg, via=action.via, addr_type=type_name(action.address),
            target=describe(action.address), gbid=action.gbid, resent=action.resent,
        )
        address = action.address
        if type(address) is InProcessAddress:
            return
        carry = self._carriers.get(type(address))
        if carry is None:
            self.carry_out(self.router.send_failed(action.msg, address))
        else:
            carry(self, action.msg, address)

    def _on_deliver(self, action: Deliver) -> None:
        self.trace_msg("msg.deliver", action.msg)
        self._dispatch(action.msg, action.recipient)

    def _on_received(self, action: Received) -> None:
        self.trace_msg("msg.in", action.msg, via=action.via, gbid=action.gbid)

    def _on_drop(self, action: Drop) -> None:
        extra = {k: v for k, v in (("via", action.via), ("gbid", action.gbid),
                                   ("detail", action.detail), ("field", action.field), ("count", action.count))
                 if v is not None}
        self.trace_msg("msg.drop", action.msg, action.sender, reason=action.reason, **extra)

    def _on_queue(self, action: Queue) -> None:
        self.trace_msg("msg.queue", action.msg, reason=action.reason)

    def _on_resolve(self, action: Resolve) -> None:
        self._spawn(self._resolving(action.participant_id))

    def _on_reject(self, action: Reject) -> None:
        self._reply(action.msg, None, ProviderRuntimeException(f"not permitted: {action.detail}"))

    def _on_withhold(self, action: Withhold) -> None:
        self.emit("mc.withhold", msg=action.msg.id, multicast=action.msg.recipient, reason=action.reason)

    def _on_topic(self, action: Subscribe | Unsubscribe) -> None:
        self._multicast_topic(action.gbid, action.topic, type(action) is Subscribe)

    def _on_learn_route(self, action: LearnRoute) -> None:
        """Nothing to do: the routing table's listener traced the put."""

    def receive_frame(
        self, data: bytes | str, via: str, gbid: str | None = None, source: str | None = None
    ) -> None:
        """A frame from the network: decode, then let the router decide."""
        if not self.running:
            return
        msg = None
        try:
            msg = self.decode_frame(data, via, gbid)
            if msg is not None:
                self.carry_out(self.router.receive(msg, via, gbid, source))
        except Exception as exc:  # a bug must not deafen the connection that hit it
            self.internal_error(exc, msg, via, gbid)

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

    def internal_error(self, exc: BaseException, msg: JoynrMessage | None, via: str, gbid: str | None) -> None:
        """A handler raised: the message is dropped with reason ``internal-error``, the
        traceback goes to ``<run dir>/log/<runtime id>.log``, and the runtime keeps serving."""
        self.log_failure(f"message {msg.id if msg else None}", exc)
        self.trace_msg("msg.drop", msg, reason="internal-error", via=via, gbid=gbid,
                       detail=shorten(f"{type(exc).__name__}: {exc}", 200))

    def decode_frame(self, data: bytes | str, via: str, gbid: str | None) -> JoynrMessage | None:
        """The message in a frame, or None after tracing why it is not one."""
        decoded = self.router.decode_frame(data, via, gbid)
        if isinstance(decoded, Drop):
            self.carry_out([decoded])
            return None
        return decoded

    def mqtt_frame(self, payload: bytes, gbid: str) -> JoynrMessage | None:
        return self.decode_frame(payload, "mqtt", gbid)

    def mqtt_message(self, msg: JoynrMessage, gbid: str) -> None:
        try:
            self.carry_out(self.router.receive(msg, "mqtt", gbid))
        except Exception as exc:
            self.internal_error(exc, msg, "mqtt", gbid)

    def route(self, msg: JoynrMessage, gbid: str | None = None) -> None:
        self.carry_out(self.router.route(msg, gbid))

    def _multicast_topic(self, gbid: str, topic: str, subscribe: bool) -> None:
        """Only a cluster controller subscribes multicast topics on a backend."""
        raise TypeError(f"{self.runtime_id}: a {self.kind} runtime subscribes no MQTT topic")

    async def add_multicast_receiver(self, mid: MulticastId, receiver: str) -> None:
        """joynr's addMulticastReceiver: ``receiver`` gets what the provider fires to ``mid``.
        A provider this runtime has no route to is looked for first."""
        if self.table.lookup(mid.provider) is None:
            await self._resolve(mid.provider)
        try:
            actions = self.router.multicast.add_receiver(mid, receiver)
        except MulticastError as exc:
            raise SubscriptionException(str(exc)) from None
        topics = [f"{a.gbid}/{a.topic}" for a in actions if isinstance(a, Subscribe)]
        self.emit("mc.receiver", op="add", multicast=str(mid), receiver=receiver, topics=topics)
        self.carry_out(actions)

    async def remove_multicast_receiver(self, mid: MulticastId, receiver: str) -> None:
        actions = self.router.multicast.remove_receiver(mid, receiver)
        topics = [f"{a.gbid}/{a.topic}" for a in actions if isinstance(a, Unsubscribe)]
        self.emit("mc.receiver", op="remove", multicast=str(mid), receiver=receiver, topics=topics)
        self.carry_out(actions)

    async def _resolving(self, participant_id: str) -> None:
        try:
            await self._resolve(participant_id)
        finally:
            self.router.resolved(participant_id)

    async def _resolve(self, participant_id: str) -> None:
        """A message waits for a participant without a route: ask whoever may know."""

    def add_next_hop(self, participant_id: str, entry: RoutingEntry, origin: str) -> PutResult:
        """Offer a route (the router's add_next_hop); what waited for it goes now."""
        result, waiting = self.router.add_next_hop(participant_id, entry, origin)
        self.carry_out(waiting)
        return result

    def remove_next_hop(self, participant_id: str) -> str:
        return self.router.remove_next_hop(participant_id)

    def purge(self, now_ms: int | None = None) -> None:
        """Drop expired waiting messages and purge expired routing entries."""
        if not self.running:
            return
        now = self.clock.now_ms() if now_ms is None else now_ms
        self.carry_out(self.router.advance(now))
        self.subscriptions.tick(now, self._attribute_values)
        self._on_purge(now)

    def _attribute_values(self, provider: str) -> dict[str, Any]:
        skeleton = self.providers.get(provider)
        implementation = skeleton.implementation if skeleton is not None else None
        return {name: getattr(implementation, name) for name in getattr(implementation, "ATTRIBUTES", ())}

    def _on_purge(self, now_ms: int) -> None:
        """Subclasses' periodic bookkeeping (sessions, discovery freshness)."""

    async def _purge_periodically(self) -> None:
        while True:
            await asyncio.sleep(self.purge_interval_ms / 1000)
            self.purge()

    def queued(self, participant_id: str | None = None) -> int:
        return self.router.queued(participant_id)

    # -- delivery to providers and proxies ----------------------------------------------
    def _dispatch(self, msg: JoynrMessage, skeleton: Any) -> None:
        if self.subscriptions.dispatch(msg, skeleton):
            return
        if isinstance(skeleton, ProviderSkeleton) and msg.type in (REQUEST, ONE_WAY):
            self._soon(self._invoke_now, skeleton, msg)
        elif msg.type == REPLY:
            # Any local participant may have called: a proxy, or the runtime's own
            # discovery and routing clients.
            future = self._pending.pop(msg.header(REQUEST_REPLY_ID) or "", None)
            if future is not None and not future.done():
                future.set_result(msg.payload)

    def _invoke_now(self, skeleton: ProviderSkeleton, msg: JoynrMessage) -> None:
        """Invoke a provider where its task would have taken its first step. Most methods
        return without suspending: they finish here, and a task (its creation, steps and
        done callback were a tenth of the provider side's loop work) is made only for
        the rest of one that suspends, so a halt still cancels it."""
        invocation = self._invoke(skeleton, msg)
        try:
            suspended_on = invocation.send(None)
        except StopIteration:
            return
        self._spawn(_rest_of(invocation, suspended_on))

    async def _invoke(self, skeleton: ProviderSkeleton, msg: JoynrMessage) -> None:
        error: BaseException | None = None
        result = None
        try:
            try:
                method, params = decode_request(msg.payload)
            except Exception as exc:  # msgpack raises many types for garbage
                raise MethodInvocationException(f"undecodable request: {exc}") from None
            result = await skeleton.invoke(method, params)
        except JoynrRuntimeException as exc:
            error = exc
        except Exception as exc:  # an implementation's own failure
            error = ProviderRuntimeException(f"{type(exc).__name__}: {exc}")
        if msg.type == ONE_WAY:
            return
        self._reply(msg, result, error, sender=skeleton.participant_id)

    def _reply(self, request: JoynrMessage, result: Any, error: BaseException | None,
               sender: str | None = None) -> None:
        self.route(
            JoynrMessage(
                type=REPLY,
                sender=sender or request.recipient,
                recipient=request.sender,
                expiry_date_ms=request.expiry_date_ms,
                payload=encode_reply(result, error),
                custom_headers=((REQUEST_REPLY_ID, request.header(REQUEST_REPLY_ID) or ""),),
            )
        )

    # -- providers and proxies -------------------------------------------------------
    def new_participant_id(self) -> str:
        return str(uuid.UUID(int=self.ids.getrandbits(128), version=4))

    async def register_provider(
        self,
        domain: str,
        interface_name: str,
        implementation: Any,
        participant_id: str | None = None,
        scope: str = "GLOBAL",
        gbids: Sequence[str] | None = None,
        priority: int = 0,
    ) -> ProviderSkeleton:
        """Register a provider: InProcess here, announced to the parent router, then in
        the local capabilities directory (and the GCD for scope GLOBAL). A registration
        that fails leaves nothing behind."""
        pid = participant_id or self.new_participant_id()
        now = self.clock.now_ms()
        entry = DiscoveryEntry(
            pid, domain, interface_name, Version(1, 0), ProviderQos(priority=priority, scope=scope),
            now, now + DEFAULT_EXPIRY_MS,
        )
        skeleton = ProviderSkeleton(pid, domain, interface_name, implementation)
        visible = entry.qos.is_global
        result, waiting = self.router.add_next_hop(
            pid, RoutingEntry(InProcessAddress(skeleton), visible, FOREVER_MS), "registration"
        )
        if result.outcome == "refused":
            raise RuntimeError(f"participant {pid!r}: routing entry refused ({result.reason})")
        self.providers[pid] = skeleton
        self.subscriptions.attach(skeleton)
        self.carry_out(waiting)  # what waited for the provider, now that it is known here
        try:
            await self._announce_participant(pid, visible)
            await self._discovery_add(entry, gbids)
        except BaseException:
            self.subscriptions.detach(pid, implementation)
            self.providers.pop(pid, None)
            self.remove_next_hop(pid)
            await self._withdraw_participant(pid)
            raise
        return skeleton

    async def unregister_provider(self, participant_id: str) -> None:
        skeleton = self.providers.pop(participant_id, None)
        if skeleton is None:
            raise KeyError(f"participant_id: no provider {participant_id!r} in {self.runtime_id}")
        self.subscriptions.detach(participant_id, skeleton.implementation)
        await self._discovery_remove(participant_id)
        self.remove_next_hop(participant_id)
        await self._withdraw_participant(participant_id)

    async def invoke_provider(self, participant_id: str, method: str, params: list[Any]) -> Any:
        """Call a method of a provider here directly, as its application does (e.g. to
        change an attribute or fire a broadcast): no message, no proxy."""
        skeleton = self.providers.get(participant_id)
        if skeleton is None:
            raise KeyError(f"participant_id: no provider {participant_id!r} in {self.runtime_id}")
        return await skeleton.invoke(method, list(params))

    async def create_proxy(
        self, interface_name: str, provider_participant_id: str, is_globally_visible: bool = False
    ) -> Proxy:
        """A proxy for a provider whose route is already known (provisioned), no discovery.
        A proxy always gets a fresh participant id, so it never collides with an entry."""
        skeleton = ProxySkeleton(self.new_participant_id(), interface_name, provider_participant_id)
        self.proxies[skeleton.participant_id] = skeleton
        self.add_next_hop(
            skeleton.participant_id,
            RoutingEntry(InProcessAddress(skeleton), is_globally_visible, FOREVER_MS),
            "registration",
        )
        await self._announce_participant(skeleton.participant_id, is_globally_visible)
        return Proxy(self, skeleton)

    async def discover_proxy(
        self,
        interface_name: str,
        domain: str | None = None,
        *,
        participant_id: str | None = None,
        scope: DiscoveryScope | str = DiscoveryScope.LOCAL_THEN_GLOBAL,
        gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> Proxy:
        """Build a proxy through discovery, by domain or by a fixed provider participant id.
        Modeled discovery errors (e.g. NO_ENTRY_FOR_SELECTED_BACKENDS) reach the caller as
        DiscoveryErrorException; no provider at all as DiscoveryException."""
        if (domain is None) == (participant_id is None):
            raise ValueError("discover_proxy: give exactly one of domain and participant_id")
        if participant_id is not None:
            entries = [await self._discovery_lookup_participant(participant_id, scope, gbids, cache_max_age_ms)]
        else:
            entries = await self._discovery_lookup([domain], interface_name, scope, gbids, cache_max_age_ms)
        entries = [e for e in entries if e.interface_name == interface_name]
        if not entries:
            raise DiscoveryException(
                f"no provider of {interface_name} in domain {domain!r} for scope {scope}"
            )
        # joynr's highest-priority arbitration; a local provider wins a tie.
        chosen = max(entries, key=lambda e: (e.qos.priority, e.is_local, e.participant_id))
        self._route_to_discovered(chosen)
        # Seed 000: a proxy is globally visible when it is connected to a global provider or
        # has discovered a local provider globally (scope GLOBAL_ONLY; LOCAL_AND_GLOBAL and
        # LOCAL_THEN_GLOBAL answer a local provider from the local store, not globally).
        visible = not chosen.is_local or DiscoveryScope(getattr(scope, "value", scope)) is DiscoveryScope.GLOBAL_ONLY
        return await self.create_proxy(interface_name, chosen.participant_id, visible)

    def _route_to_discovered(self, entry: DiscoveryEntryWithMetaInfo) -> None:
        """A libjoynr runtime reaches every discovered provider through its cluster
        controller; a cluster controller has its routes from the lookup itself."""

    async def _announce_participant(self, participant_id: str, is_globally_visible: bool) -> None:
        """Tell the parent router (cluster controller) about a new local participant."""

    async def _withdraw_participant(self, participant_id: str) -> None:
        """Tell the parent router that a local participant went away."""

    async def _discovery_add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> None:
        raise NotImplementedError

    async def _discovery_remove(self, participant_id: str) -> None:
        raise NotImplementedError

    async def _discovery_lookup(self, domains, interface_name, scope, gbids, cache_max_age_ms):
        raise NotImplementedError

    async def _discovery_lookup_participant(self, participant_id, scope, gbids, cache_max_age_ms):
        raise NotImplementedError

    async def request(
        self,
        sender: str,
        recipient: str,
        method: str,
        params: list[Any],
        ttl_ms: int = DEFAULT_TTL_MS,
        gbid: str | None = None,
    ) -> Any:
        """Send a request from a local participant and wait for its reply (or time out)."""
        corr = str(uuid.uuid4())
        msg = self._outgoing(REQUEST, sender, recipient, method, params, ttl_ms,
                             ((REQUEST_REPLY_ID, corr),))
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending[corr] = future
        # A timer on the future itself, not wait_for: that adds a second future and a
        # callback that wakes this task one loop turn after the reply resolved it.
        timer = loop.call_later(ttl_ms / 1000, _time_out, future)
        try:
            self.route(msg, gbid)
            payload = await future
        except TimeoutError:
            raise JoynrTimeoutException(
                f"{method} to {recipient}: no reply within {ttl_ms} ms (message {msg.id})"
            ) from None
        finally:
            timer.cancel()
            self._pending.pop(corr, None)
        return decode_reply(payload)

    def one_way(
        self, sender: str, recipient: str, method: str, params: list[Any], ttl_ms: int = DEFAULT_TTL_MS
    ) -> str:
        msg = self._outgoing(ONE_WAY, sender, recipient, method, params, ttl_ms)
        self.route(msg)
        return msg.id

    def _outgoing(
        self, type_: str, sender: str, recipient: str, method: str, params: list[Any], ttl_ms: int,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> JoynrMessage:
        return JoynrMessage(
            type=type_,
            sender=sender,
            recipient=recipient,
            expiry_date_ms=self.clock.now_ms() + ttl_ms,
            payload=encode_request(method, params),
            custom_headers=headers,
        )


def _action_table(cls: type[Runtime]) -> dict[type, Callable[[Any, Any], None]]:
    """What carry_out calls per action type, taken from ``cls`` so that a subclass's
    override of a handler counts."""
    return {
        Send: cls._on_send, Deliver: cls._on_deliver, Received: cls._on_received, Drop: cls._on_drop,
        Queue: cls._on_queue, Resolve: cls._on_resolve, Reject: cls._on_reject, Withhold: cls._on_withhold,
        Subscribe: cls._on_topic, Unsubscribe: cls._on_topic, LearnRoute: cls._on_learn_route,
    }


Runtime._on_action = _action_table(Runtime)


class Proxy:
    """What an application holds: calls go from the proxy's participant to its provider."""

    def __init__(self, runtime: Runtime, skeleton: ProxySkeleton) -> None:
        self.runtime = runtime
        self.skeleton = skeleton

    @property
    def participant_id(self) -> str:
        return self.skeleton.participant_id

    @property
    def provider_participant_id(self) -> str:
        return self.skeleton.provider_participant_id

    async def call(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> Any:
        return await self.runtime.request(
            self.participant_id, self.provider_participant_id, method, list(params), ttl_ms
        )

    def one_way(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> str:
        return self.runtime.one_way(
            self.participant_id, self.provider_participant_id, method, list(params), ttl_ms
        )

    async def subscribe_attribute(self, attribute: str, qos: SubscriptionQos | None = None) -> Subscription:
        """Subscribe to an attribute (on change unless ``qos`` says otherwise): the current
        value comes first, then each change."""
        return await self.runtime.subscriptions.subscribe(
            self.participant_id, self.provider_participant_id, attribute, "attribute",
            qos or SubscriptionQos("on-change"))

    async def subscribe_broadcast(self, broadcast: str, qos: SubscriptionQos | None = None, *,
                                  filter: dict[str, Any] | None = None,
                                  partitions: tuple[str, ...] = ()) -> Subscription:
        """Subscribe to a broadcast: with ``filter`` a selective one (request and
        publications between proxy and provider), else a multicast (``partitions`` may use
        ``+`` and end with ``*``)."""
        kind = broadcast_kind(self.skeleton.interface_name, broadcast, filter)
        return await self.runtime.subscriptions.subscribe(
            self.participant_id, self.provider_participant_id, broadcast, kind,
            qos or SubscriptionQos("on-change"), filter=filter, partitions=tuple(partitions))

    async def unsubscribe(self, subscription_id: str) -> None:
        await self.runtime.subscriptions.unsubscribe(subscription_id)


def _time_out(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


async def _rest_of(coroutine: Coroutine[Any, Any, Any], suspended_on: Any) -> Any:
    # A coroutine for the task (create_task refuses a bare generator from Python 3.12 on).
    return await _resumed(coroutine, suspended_on)


@types.coroutine
def _resumed(coroutine: Coroutine[Any, Any, Any], suspended_on: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine whose first step was taken outside a task and suspended on
    ``suspended_on``: what ``yield from`` would do, from the second step on. The task that
    runs it waits for what the coroutine waits for, and its cancellation is thrown in."""
    while True:
        try:
            try:
                sent = yield suspended_on
            except BaseException as exc:  # a cancellation, or what the awaited future raised
                suspended_on = coroutine.throw(exc)
            else:
                suspended_on = coroutine.send(sent)
        except StopIteration as stop:
            return stop.value
