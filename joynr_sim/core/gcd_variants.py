"""Variants of the GCD's rules (seed 001): (name, seed sentence, behaviour); see ``core.variants``.

Each is a GCD a joynr engineer has met: the directory before multiple backends, or one that
got a single rule of the multi-backend GCD wrong. ``core.gcd.GlobalCapabilitiesDirectory``
takes the name (``variant=``) and changes that one rule; everything else stays seed 001.
"""

from __future__ import annotations

SEED = "001_2030eddcb973837f.txt"

IGNORES_GBIDS = "gcd:ignores-gbids"
NO_GBID_ERRORS = "gcd:no-gbid-errors"
REMOVE_ALL_GBIDS = "gcd:remove-all-gbids"
EMPTY_LOOKUP_ERROR = "gcd:empty-lookup-error"
ENTRY_PER_GBID = "gcd:entry-per-gbid"
RETURNS_OUTDATED = "gcd:returns-outdated"
NO_REMOVE_STALE = "gcd:no-remove-stale"
OLD_TOUCH_IGNORED = "gcd:old-touch-ignored"
TOUCH_KEEPS_EXPIRY = "gcd:touch-keeps-expiry"

GCD_VARIANTS: tuple[tuple[str, str, str], ...] = (
    (IGNORES_GBIDS,
     f"{SEED}: 'Providers are looked up only in the selected BEs (GBIDs).'; 'Provider gets registered "
     "for the selected BEs (GBIDs).'; 'Providers are looked up in the BE (GBID) of the GCD instance only'",
     "the GCD before multiple backends: GBIDs select nothing. An add (new or old) registers the provider "
     "in every backend, so the last add of a participantId wins everywhere; a lookup (new or old) finds "
     "it whatever backends it selects, the own one first; a remove (new or old) removes it everywhere"),
    (NO_GBID_ERRORS,
     f"{SEED}: 'add(GlobalDisoveryEntry, []) or add(GlobalDisoveryEntry, [\"\"]) ... GCD: returns error "
     "value INVALID_GBID'; 'add(GlobalDisoveryEntry, [\"unknownGBID\"]) ... GCD: returns error value "
     "UNKNOWN_GBID'; 'Invalid and unknown GBIDs are handled like in the new add method'",
     "GBIDs are not checked: an empty GBID (or none) stands for the own GBID, as joynr's GCD once "
     "treated it, a repeated one counts once and an unknown one is used as given"),
    (REMOVE_ALL_GBIDS,
     f"{SEED}: 'remove(participantId1, [GBID1]) - GCD: Remove provider with participantId1 from GBID1'; "
     "'Returns error value NO_ENTRY_FOR_PARTICIPANT or NO_ENTRY_FOR_SELECTED_BACKENDS'",
     "the remove of the GCD before multiple backends: a remove (new or old) deletes the participant in "
     "every backend, not only the selected ones (or the receiving instance's own), and answers no error "
     "when there is nothing to delete"),
    (EMPTY_LOOKUP_ERROR,
     f"{SEED}: 'Example III (Provider is not registered): lookup([domain1], interface1, [GBID1]) - GCD: "
     "Nothing found for any GBID: returns empty list'",
     "a domain lookup that finds nothing in the selected backends answers NO_ENTRY_FOR_SELECTED_BACKENDS "
     "also when the interface is registered in no backend at all"),
    (ENTRY_PER_GBID,
     f"{SEED}: 'GDEs returned from the lookup methods have to be unique per participantId'; 'non BE "
     "provider: GDE of GCD instance's BE (=consumer's BE) if available' (an OPTIONAL rule joynr's GCD and "
     "this one follow)",
     "a lookup returns an entry for every selected backend the provider is registered in, in the "
     "caller's GBID order; a participant lookup takes the first of them, not the own backend's"),
    (RETURNS_OUTDATED,
     f"{SEED}: 'Expired DEs and DEs with an outdated last seen date are removed, e.g. periodically, and "
     "are not returned as result of a lookup request.'",
     "lookups return entries whose last seen date is older than the last-seen timeout until the "
     "periodic sweep has deleted them"),
    (NO_REMOVE_STALE,
     f"{SEED}: 'Unregisters stale providers of a specific cluster controller which have been registered "
     "in a previous cluster controller lifecycle from all backends.'",
     "removeStale is accepted and removes nothing: a crashed cluster controller's providers stay "
     "until they expire"),
    (OLD_TOUCH_IGNORED,
     f"{SEED}: 'The last seen date of all GDEs of a CC is updated when the touch method is called with "
     "the cluster controller ID of that CC.'",
     "the old touch (cluster controller id only) changes nothing; only the new touch with participant "
     "ids refreshes entries"),
    (TOUCH_KEEPS_EXPIRY,
     f"{SEED}: \"The last seen date will be set to the time of the touch call ('now'), the expiry date "
     "will be extended, i.e. it will be set to 'now + N'\"",
     "the new touch sets the last seen date only, as the old touch does: the expiry date stays, so a "
     "provider whose cluster controller keeps touching it still expires six weeks after its add"),
)

GCD_VARIANT_NAMES: tuple[str, ...] = tuple(name for name, _, _ in GCD_VARIANTS)
