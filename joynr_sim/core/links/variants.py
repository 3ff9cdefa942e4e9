"""Variants of the link registry's rules (seed 004): (name, seed sentence, behaviour); see
``core.variants``.

Each is a historic or naive link registry an AMQP broker engineer would recognise, and
each breaks one sentence of the seed; ``LinkRegistry(variant=...)`` behaves so, everything
else keeps the seed's rules. Where each one acts:

  resume-by-unsettled   link.Link.attach: the mode of an attach to a stored terminus
  no-recover            link.Link.attach: an attach with a null local terminus
  no-reject             link.Link.attach: a terminus not found, or not written
  uncapped-durability   registry.LinkRegistry._effective: the durability granted
  no-thief-queue        turn.LastComerTurn: the order waiting operations get the link
  steal-refused         link.Link.attach: an attach of a link attached elsewhere
  no-detached-timeout   registry.LinkRegistry.purge_expired
"""

from __future__ import annotations

from .model import LinkError

SEED = "004_b96328aa0d55de66.txt"

RESUME_BY_UNSETTLED = "links:resume-by-unsettled"
NO_RECOVER = "links:no-recover"
NO_REJECT = "links:no-reject"
UNCAPPED_DURABILITY = "links:uncapped-durability"
NO_THIEF_QUEUE = "links:no-thief-queue"
STEAL_REFUSED = "links:steal-refused"
NO_DETACHED_TIMEOUT = "links:no-detached-timeout"

LINK_VARIANTS: tuple[tuple[str, str, str], ...] = (
    (
        RESUME_BY_UNSETTLED,
        f"{SEED}: 'Resuming: Terminus exists, LinkEndpoint does not exist, handle not assigned, "
        "unsettled state', 'Reattaching: Terminus exists, LinkEndpoint exists, handle not assigned, no state'",
        "resume or reattach told apart by the unsettled state alone: a suspended link with nothing "
        "unsettled reattaches, an attached one with deliveries in flight resumes",
    ),
    (
        NO_RECOVER,
        f"{SEED}: 'When Attaching with a \"null\" Source or Target the existing Terminus should be "
        "easily recovered from the Link name.'",
        "termini are never looked up by link name: an attach with a null source or target is "
        "refused (amqp:not-found) even when the registry holds the terminus",
    ),
    (
        NO_REJECT,
        f"{SEED}: 'must detach link if terminus is not created/found upon Attach (rejecting link)'",
        "an attach whose terminus is not found is attached to an empty, non-durable terminus, and "
        "one the store cannot read or write is attached from memory, instead of being detached",
    ),
    (
        UNCAPPED_DURABILITY,
        f"{SEED}: 'A unsettledStore should support different levels of capability in alignment with "
        "the TerminusDurability.'",
        "grants every terminus the durability its attach asks for, more than the store keeps "
        "(unsettled state on a JSON store, anything on a memory one)",
    ),
    (
        NO_THIEF_QUEUE,
        f"{SEED}: 'attach(Session s, Source s, Target t) -> Future<LinkEndpoint> This must take "
        "care of link stealing (e.g., theifQueue).'",
        "no thief queue: attaches waiting for a link contend as for a bare lock and the last to "
        "arrive takes it first",
    ),
    (
        STEAL_REFUSED,
        f"{SEED}: 'can be stolen by sending second Attach while not suspended (2.6.1)'",
        "uniqueness by refusal: a second attach of a link attached on another connection is "
        "refused (amqp:resource-locked) and the first keeps it",
    ),
    (
        NO_DETACHED_TIMEOUT,
        f"{SEED}: 'If the Links are not Attached for more than the timeout they should be removed "
        "from the LinkRegistry.'",
        "the detached timeout is ignored: a suspended link stays in the registry and its store for ever",
    ),
)
LINK_VARIANT_NAMES: tuple[str, ...] = tuple(name for name, _, _ in LINK_VARIANTS)


def validate_link_variant(value: object, field: str = "variant") -> str | None:
    """A link variant's name, or None for the seed's rules."""
    if value is not None and value not in LINK_VARIANT_NAMES:
        raise LinkError(field, value, f"expected None or one of {', '.join(LINK_VARIANT_NAMES)}")
    return value  # type: ignore[return-value]
