"""The link registry: AMQP 1.0 links ("Design v3" of the link-registry seed) as joynr-sim
uses them for MQTT broker sessions.

A link is identified by the ordered tuple (source container id, target container id, link
name); for a sending link the source container is the local one, for a receiving link the
remote one. In joynr-sim the remote container is a GBID (one broker per GBID) and the link
name is the MQTT client id: a second CONNECT with the same client id steals the link, a
persistent session is a suspended link whose unacknowledged QoS 1 messages are its
unsettled deliveries.

The registry is pure (no I/O but the optional store, no wall clock unless none is passed)
and thread-safe. Its parts:

  model      names and their validation, termini, keys, attach and detach outcomes
  events     what listeners are told, one event per transition
  store      the record of one link and the LinkStore protocol it is persisted through
  reconcile  the unsettled deliveries of a resumed link against the peer's, or of a link
             established anew because the peer kept no state
  link       one Link: attach and its modes, detach, unsettled deliveries
  state      what a link holds, and the views of it
  record     a link's record in the store, which registries of several processes may
             share; the refresh and expiry of links against it
  turn       a link's turn: the FIFO ticket lock its operations run in
  registry   LinkRegistry: one Link per key, loading the store, reopen (a restarted
             process), refresh, purge, event delivery
  variants   the historic or naive registries a run may use instead of the seed's rules

Locking, and why it cannot deadlock:

* Every operation that changes a link (attach, detach, add_unsettled, settle, purge) runs
  in that link's *turn*: a FIFO ticket lock. Waiting attaches of one link are its thief
  queue, served strictly in arrival order, one at a time.
* A turn holder never waits for anything but leaf locks (the registry's map lock, the
  store's lock, the event queue's lock), never for another link's turn and never for the
  connection it steals from: the owner is detached by the registry on its behalf and told
  afterwards. So two connections stealing each other's links at once cannot wait on each
  other.
* Callbacks (listeners, ``on_stolen``) run after the turn is released, with no lock held,
  from one ordered queue: they see events in the order the transitions happened and may
  call back into the registry. They should not block.
"""

from __future__ import annotations

from .events import (
    LinkAttached,
    LinkDetached,
    LinkEvent,
    LinkExpired,
    LinkRecovered,
    LinkResumed,
    LinkStolen,
    LinkStored,
    Listener,
    StolenCallback,
)
from .link import Link
from .model import (
    DELIVERY_STATES,
    ERR_INTERNAL,
    ERR_NOT_FOUND,
    ERR_RESOURCE_LOCKED,
    ERR_STOLEN,
    ESTABLISH,
    MAX_ADDRESS_BYTES,
    MAX_DELIVERY_TAG_BYTES,
    MAX_NAME_BYTES,
    MQTT_CLIENT_ID_MAX_BYTES,
    MQTT_STRICT_CLIENT_ID_MAX_BYTES,
    REATTACH,
    RECOVER,
    REJECT,
    RESUME,
    ROLES,
    STEAL,
    TERMINAL_STATES,
    AttachMode,
    AttachOutcome,
    Delivery,
    DetachOutcome,
    LinkError,
    LinkErrorCondition,
    LinkKey,
    LinkStateError,
    Role,
    Terminus,
    TerminusDurability,
    validate_container_id,
    validate_delivery_state,
    validate_delivery_tag,
    validate_link_name,
    validate_mqtt_client_id,
)
from .reconcile import reconcile, restart_deliveries
from .registry import (
    LinkRegistry,
    wall_clock_ms,
)
from .store import (
    LinkStore,
    LinkStoreError,
    StoredLink,
)
from .variants import LINK_VARIANT_NAMES, LINK_VARIANTS

__all__ = [
    "AttachMode",
    "AttachOutcome",
    "DELIVERY_STATES",
    "Delivery",
    "DetachOutcome",
    "ERR_INTERNAL",
    "ERR_NOT_FOUND",
    "ERR_RESOURCE_LOCKED",
    "ERR_STOLEN",
    "ESTABLISH",
    "Link",
    "LinkAttached",
    "LinkDetached",
    "LinkError",
    "LinkErrorCondition",
    "LINK_VARIANTS",
    "LINK_VARIANT_NAMES",
    "LinkEvent",
    "LinkExpired",
    "LinkKey",
    "LinkRecovered",
    "LinkRegistry",
    "LinkResumed",
    "LinkStateError",
    "LinkStolen",
    "LinkStore",
    "LinkStoreError",
    "LinkStored",
    "Listener",
    "MAX_ADDRESS_BYTES",
    "MAX_DELIVERY_TAG_BYTES",
    "MAX_NAME_BYTES",
    "MQTT_CLIENT_ID_MAX_BYTES",
    "MQTT_STRICT_CLIENT_ID_MAX_BYTES",
    "REATTACH",
    "RECOVER",
    "REJECT",
    "RESUME",
    "ROLES",
    "Role",
    "STEAL",
    "StolenCallback",
    "StoredLink",
    "TERMINAL_STATES",
    "Terminus",
    "TerminusDurability",
    "reconcile",
    "restart_deliveries",
    "validate_container_id",
    "validate_delivery_state",
    "validate_delivery_tag",
    "validate_link_name",
    "validate_mqtt_client_id",
    "wall_clock_ms",
]
