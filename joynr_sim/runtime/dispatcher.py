"""joynr's dispatcher: what a runtime does with a message its node delivered to one of its own
participants, and how a local participant's call waits for its reply.

A request or one-way message goes to its provider's implementation; a reply finds the call
that waits for it (joynr's reply caller directory) by its request-reply id; subscription
messages go to the runtime's subscriptions first. Everything here is the memory of one
incarnation: a crash throws the dispatcher away, and the calls waiting in it fail.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Callable, Coroutine, Generator
from typing import Any

from ..core.message import ONE_WAY, REPLY, REQUEST, REQUEST_REPLY_ID, JoynrMessage
from .participants import (
    JoynrRuntimeException,
    JoynrTimeoutException,
    MethodInvocationException,
    ProviderRuntimeException,
    ProviderSkeleton,
    ProxySkeleton,
    decode_reply,
    decode_request,
    encode_reply,
)
from .subscriptions import Subscriptions


class Dispatcher:
    def __init__(self, route: Callable[[JoynrMessage], None], spawn: Callable[[Coroutine], Any],
                 soon: Callable[..., None], subscriptions: Subscriptions) -> None:
        self._route, self._spawn, self._soon = route, spawn, soon
        self.subscriptions = subscriptions
        self.providers: dict[str, ProviderSkeleton] = {}
        self.proxies: dict[str, ProxySkeleton] = {}
        self._pending: dict[str, asyncio.Future] = {}  # request-reply id -> the call's future

    # -- what the node delivered -------------------------------------------------------
    def dispatch(self, msg: JoynrMessage, skeleton: Any) -> None:
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
        self.reply(msg, result, error, sender=skeleton.participant_id)

    def reply(self, request: JoynrMessage, result: Any, error: BaseException | None, sender: str | None = None) -> None:
        self._route(JoynrMessage(
            type=REPLY,
            sender=sender or request.recipient,
            recipient=request.sender,
            expiry_date_ms=request.expiry_date_ms,
            payload=encode_reply(result, error),
            custom_headers=((REQUEST_REPLY_ID, request.header(REQUEST_REPLY_ID) or ""),),
        ))

    # -- a local participant's call ------------------------------------------------------
    async def call(self, msg: JoynrMessage, method: str, corr: str, ttl_ms: int, gbid: str | None,
                   route: Callable[[JoynrMessage, str | None], None]) -> Any:
        """Route ``msg`` and wait for the reply with request-reply id ``corr``, at most
        ``ttl_ms``: its decoded result, or the error it carries."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._pending[corr] = future
        # A timer on the future itself, not wait_for: that adds a second future and a
        # callback that wakes this task one loop turn after the reply resolved it.
        timer = loop.call_later(ttl_ms / 1000, _time_out, future)
        try:
            route(msg, gbid)
            payload = await future
        except TimeoutError:
            raise JoynrTimeoutException(
                f"{method} to {msg.recipient}: no reply within {ttl_ms} ms (message {msg.id})"
            ) from None
        finally:
            timer.cancel()
            self._pending.pop(corr, None)
        return decode_reply(payload)

    def fail_waiting(self, why: str) -> None:
        """The runtime went down: every call waiting here ends."""
        for future in self._pending.values():
            if not future.done():
                future.set_exception(JoynrTimeoutException(why))
        self._pending.clear()

    def attribute_values(self, provider: str) -> dict[str, Any]:
        skeleton = self.providers.get(provider)
        implementation = skeleton.implementation if skeleton is not None else None
        return {name: getattr(implementation, name) for name in getattr(implementation, "ATTRIBUTES", ())}


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
