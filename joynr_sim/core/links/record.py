"""A link and its record in the store, which registries of several holders (processes) may
share.

Before it changes a link, an operation brings the link up to its record (``_sync``): the
connection the record names is the owner wherever it was attached. What the link then
holds goes back to the store through ``_write``, as ``_record`` says the terminus's
durability lets it. The registry's two passes over its links are the same comparison with
nothing to attach: ``_refresh`` (did another holder take the link?) and
``_purge_if_expired`` (detached too long: the record goes).

Kept apart from attach and detach (``link``) because this is where memory and store are
made to agree, and the rules for that (who owns the link, what a read or write failure
leaves unchanged) hold for every operation alike. Everything here runs in the link's turn.
"""

from __future__ import annotations

from collections.abc import Mapping

from .events import LinkDetached, LinkEvent, LinkExpired, LinkStored
from .model import ERR_STOLEN, Terminus, TerminusDurability
from .state import LinkState
from .store import LinkStoreError, StoredLink

MIRRORED = object()  # LinkState._stored: the record of the link as it is in memory


class LinkRecord(LinkState):
    """The link's state kept in step with its record in the store; the base of ``Link``."""

    def _stored_record(self) -> StoredLink | None:
        if self._stored is MIRRORED:
            assert self._terminus is not None
            self._stored = self._record(self._terminus, self._unsettled, self._owner)
        return self._stored  # type: ignore[return-value]

    def _record(
        self, terminus: Terminus, unsettled: Mapping[str, str | None], owner: str | None
    ) -> StoredLink | None:
        """What the store should hold for this terminus, per its durability, attached on
        owner (None: suspended)."""
        if terminus.durability == TerminusDurability.NONE:
            return None
        pairs = (
            tuple(sorted(unsettled.items()))
            if terminus.durability == TerminusDurability.UNSETTLED_STATE
            else ()
        )
        holder = None if owner is None else self._registry.holder
        return StoredLink(self.role, self.remote_container_id, self.link_name, terminus, pairs,
                          owner, holder)

    def _sync(self, now: int, events: list[LinkEvent]) -> None:
        """Bring the link up to its record in the store, which a registry of another holder
        sharing the store may have changed since this one last read or wrote it.

        The connection the record names is the owner. A connection of this registry that
        it no longer names lost the link meanwhile (stolen, or closed or expired by the
        other holder): it is detached here, without its on_stolen (only refresh calls that:
        here it may be the very connection attaching again). When reading the store
        raises, memory is unchanged and the failure is an event."""
        reg = self._registry
        store = reg.store
        if store is None or reg.max_durability == TerminusDurability.NONE:
            return  # nothing is stored, so nothing is shared
        try:
            record = store.find(self.role, self.remote_container_id, self.link_name)
        except LinkStoreError as e:
            events.append(LinkStored(now, self.key, "find", None, False, str(e)))
            raise
        if record == self._stored_record():
            return
        owner = reg._live_owner(record, self._owner)
        if self._owner is not None and owner != self._owner:
            events.append(LinkDetached(now, self.key, self._owner, False,
                                       None if owner is None else ERR_STOLEN, owner))
        terminus = None if record is None else reg._effective(record.terminus)
        with self._cond:
            if owner != self._owner:
                self._on_stolen = None
                self._detached_since_ms = now if owner is None else None
            self._owner = owner
            self._terminus = terminus
            if record is None:
                self._unsettled = {}
            elif terminus is not None and terminus.durability == TerminusDurability.UNSETTLED_STATE:
                self._unsettled = dict(record.unsettled)
            self._stored = record

    def _write(self, record: StoredLink | None, now: int, events: list[LinkEvent]) -> None:
        """Bring the store to record (None: nothing stored); store and memory are unchanged
        when it raises."""
        store = self._registry.store
        if store is None or record == self._stored_record():
            return
        op = "save" if record is not None else "delete"
        durability = record.terminus.durability if record is not None else None
        try:
            if record is not None:
                store.save(record)
            else:
                store.delete(self.role, self.remote_container_id, self.link_name)
        except LinkStoreError as e:
            events.append(LinkStored(now, self.key, op, durability, False, str(e)))
            raise
        with self._cond:
            self._stored = record
        events.append(LinkStored(now, self.key, op, durability, True))

    def _refresh(self) -> None:
        """Look in the store whether a connection of another holder took the link from the
        connection of this registry that has it; if so, detach that connection here and
        tell it through its on_stolen (its broker may not have closed it: amqtt 0.12 keeps
        both). Read failures are events; the link stays as it was."""
        reg = self._registry
        with self._turn:
            if self._removed or self._owner is None:
                return
            owner, callback = self._owner, self._on_stolen
            events: list[LinkEvent] = []
            try:
                self._sync(reg._clock(), events)
            except LinkStoreError:
                pass
            reg._enqueue(events)
            if self._owner not in (owner, None) and callback is not None:
                for event in events:
                    if isinstance(event, LinkDetached) and event.connection_id == owner:
                        reg._enqueue_call(callback, event)

    def _purge_if_expired(self, now_ms: int, timeout_ms: int) -> bool:
        reg = self._registry
        with self._turn:
            events: list[LinkEvent] = []
            try:
                self._sync(now_ms, events)
            except LinkStoreError:
                reg._enqueue(events)  # the failure is an event; the link stays
                return False
            since = self._detached_since_ms
            if (self._removed or self._owner is not None or since is None
                    or now_ms - since <= timeout_ms):
                reg._enqueue(events)
                return False
            try:
                self._write(None, now_ms, events)
            except LinkStoreError:
                reg._enqueue(events)  # the failure is an event; the link stays
                return False
            with self._cond:
                self._removed = True
            reg._forget(self)
            events.append(LinkExpired(now_ms, self.key, since, timeout_ms))
            reg._enqueue(events)
            return True
