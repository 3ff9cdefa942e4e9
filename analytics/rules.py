"""The routing-entry rule sets of the seeds, written down as data.

Each policy is an ordered list of clauses (first match wins), each with the seed sentence
it comes from; the replace clauses of 000 and 002 are matrices of address types. The
overwrite check expands them into a rule table (one row per runtime kind, existing type,
new type and flag combination) and joins it against the ``rt.put`` events. Nothing here is
shared with the simulator: these are the seeds read again. Only the names the trace uses
(address types) come from the trace catalogue.
"""

from __future__ import annotations

from itertools import product

from trace_schema import vocabulary

# The address types as the trace names them; the matrices below must cover each.
TYPES = vocabulary("address_type")
KINDS = ("cluster-controller", "libjoynr")  # the routing tables the seeds describe
# Runtimes whose routing table is one of those: the GCD runs on a cluster controller (its
# messages go through a cluster controller's router), so its table follows those rules.
TABLE_KIND = {"gcd": "cluster-controller"}
NONE = "none"  # no existing entry

JUDGED = ("precedence", "local-remote", "gcd-trust")
DEFAULT = "precedence"  # the newest seed; judges runs that declare a policy no seed describes
SEEDS = {
    "precedence": "000_65e83c7f1cb84fd7.txt",
    "local-remote": "002_ed27daa13e583359.txt",
    "gcd-trust": "003_6b6ea9fcba272a2c.txt",
}


def _matrix(text: str) -> dict[tuple[str, str], bool]:
    """Rows: existing type; columns: new type; R: replace allowed, -: refused."""
    rows = [line.split() for line in text.strip().splitlines()]
    header, body = rows[0][1:], rows[1:]
    return {(r[0], new): cell == "R" for r in body for new, cell in zip(header, r[1:])}


# 000 "it can be replaced only if": same type; new InProcess; remote -> remote; in libjoynr
# WebSocket/WebSocketClient/remote -> WebSocket and remote -> WebSocketClient; in a cluster
# controller WebSocket/remote -> WebSocketClient and WebSocket -> remote.
PRECEDENCE_REPLACE = {
    "cluster-controller": _matrix(
        """
        old\\new         InProcess WebSocket WebSocketClient Mqtt Channel
        InProcess        R         -         -               -    -
        WebSocket        R         R         R               R    R
        WebSocketClient  R         -         R               -    -
        Mqtt             R         -         R               R    R
        Channel          R         -         R               R    R
        """
    ),
    "libjoynr": _matrix(
        """
        old\\new         InProcess WebSocket WebSocketClient Mqtt Channel
        InProcess        R         -         -               -    -
        WebSocket        R         R         -               -    -
        WebSocketClient  R         R         R               -    -
        Mqtt             R         R         R               R    R
        Channel          R         R         R               R    R
        """
    ),
}

# 002 constraints 2a-2c: local -> local, remote -> local, remote -> remote; never
# local -> remote. Local: InProcess, WebSocket, WebSocketClient; remote: Mqtt, Channel.
_LOCAL_REMOTE = _matrix(
    """
    old\\new         InProcess WebSocket WebSocketClient Mqtt Channel
    InProcess        R         R         R               -    -
    WebSocket        R         R         R               -    -
    WebSocketClient  R         R         R               -    -
    Mqtt             R         R         R               R    R
    Channel          R         R         R               R    R
    """
)
LOCAL_REMOTE_REPLACE = {kind: _LOCAL_REMOTE for kind in KINDS}

# A put clause: (condition, outcome, rule name, seed text). Conditions name flags computed
# per event: no_old, same_routing (same addr and visibility), same_addr (same addr),
# old_sticky, new_sticky, from_gcd (origin "gcd"), new_expired (expiry < ts), own_topic
# (a cluster controller offered an Mqtt address on one of its own topics), matrix, always.
PUT_CLAUSES: dict[str, list[tuple[str, str, str, str]]] = {
    "precedence": [
        ("own_topic", "refuse", "own-topic",
         "000 WebSocketClientAddress: 'must not be overwritten by a global address which "
         "could cause a loop'; a cluster controller's own topic routes back to itself"),
        ("no_old", "accept", "create",
         "000: 'If no Routing Entry for a participantId exists, it is always allowed to create one'"),
        ("same_routing", "accept", "merge",
         "000: 'a new entry contains the same address and isGloballyVisible flag, only the "
         "expiryDateMs attribute and the isSticky flag are merged'"),
        ("old_sticky", "refuse", "sticky",
         "000: 'Sticky Routing Entries (provisioned routing entries) cannot be replaced or removed'"),
        ("matrix", "matrix", "precedence",
         "000: 'it can be replaced only if' (per runtime kind), 'Precedence of address types'"),
    ],
    "local-remote": [
        ("no_old", "accept", "create",
         "002 constraint 4: 'If no Routing Entry for a participantId exists, it is always "
         "allowed to create one'"),
        ("same_routing", "accept", "merge",
         "002 scenario 6b: 'the expiryDate of the existing RoutingEntry gets extended'"),
        ("matrix", "matrix", "local-remote",
         "002 constraint 2a-2c: local->local, remote->local, remote->remote"),
    ],
    "gcd-trust": [
        ("new_expired", "refuse", "expired",
         "003 CREATE/UPDATE: 'the expiryDate is not in the past'"),
        ("no_old", "accept", "create", "003 CREATE: 'it does not exist'"),
        ("new_sticky", "accept", "sticky-create", "003 CREATE: 'it has the sticky flag set'"),
        ("same_addr", "accept", "same-routing",
         "003 UPDATE: 'the routing information (routing address and participantId) stayed the same'"),
        ("from_gcd", "accept", "from-gcd", "003 UPDATE: 'the entry comes from GCD'"),
        ("always", "refuse", "routing-info-changed",
         "003 constraint 2: 'this Routing Entry cannot change, unless GCD says so'"),
    ],
}

MATRICES = {"precedence": PRECEDENCE_REPLACE, "local-remote": LOCAL_REMOTE_REPLACE}

# Whether an accepted put must keep the longest expiry and sticky if either was sticky.
MERGES_BOOKKEEPING = {
    "precedence": "000: 'the longest expiryDate from existing and new entry is kept', "
    "'the isSticky flag is set to true, if it is true in either old or new entry'",
    "local-remote": "002 constraints 3 and 4",
}

# Remove and purge clauses: (condition, outcome, rule, seed); conditions: old_sticky,
# old_expired, not_expired, always.
DELETE_CLAUSES: dict[tuple[str, str], list[tuple[str, str, str, str]]] = {
    ("precedence", "remove"): [
        ("old_sticky", "refuse", "sticky",
         "000: 'Sticky Routing Entries (provisioned routing entries) cannot be replaced or removed'"),
        ("always", "accept", "unregister", "000: 'A provider unregisters The RoutingEntry gets removed'"),
    ],
    ("precedence", "purge"): [
        ("not_expired", "refuse", "not-expired",
         "000: 'once this date has passed, the entry can be garbage collected'"),
        ("old_sticky", "refuse", "sticky",
         "000: 'removes them (if they are not sticky)'"),
        ("always", "accept", "expired", "000: 'A RoutingEntry expires'"),
    ],
    ("local-remote", "remove"): [
        ("always", "accept", "unregister", "002 scenario 3: 'The RoutingEntry gets removed'"),
    ],
    ("local-remote", "purge"): [
        ("not_expired", "refuse", "not-expired",
         "002: 'once this date has passed, the entry can be garbage collected'"),
        ("old_sticky", "refuse", "sticky",
         "002: 'isSticky defines whether this entry is protected against garbage collection'"),
        ("always", "accept", "expired", "002 scenario 7"),
    ],
    ("gcd-trust", "remove"): [
        ("old_expired", "accept", "expired", "003 DELETE: 'the entry expired'"),
        ("old_sticky", "refuse", "sticky", "003 DELETE: 'OR it is not sticky'"),
        ("always", "accept", "not-sticky", "003 DELETE: 'it is not sticky'"),
    ],
    ("gcd-trust", "purge"): [
        ("not_expired", "refuse", "not-expired", "003 DELETE: 'the entry expired'"),
        ("always", "accept", "expired", "003 DELETE: 'the entry expired'"),
    ],
}

PUT_FLAGS = ("same_routing", "same_addr", "old_sticky", "new_sticky", "from_gcd",
             "new_expired", "own_topic")


def put_rule_rows() -> list[tuple]:
    """The put rule table: (policy, kind, old_type, new_type, *PUT_FLAGS, expected, rule, seed).

    Only consistent combinations: no flags about an entry that does not exist, equal
    addresses only between equal types, own topics only for Mqtt in a cluster controller.
    """
    rows = []
    for policy, kind, old, new in product(JUDGED, KINDS, (NONE, *TYPES), TYPES):
        for flags in product((False, True), repeat=len(PUT_FLAGS)):
            f = dict(zip(PUT_FLAGS, flags))
            if old == NONE and (f["same_routing"] or f["same_addr"] or f["old_sticky"]):
                continue
            if old != new and f["same_addr"]:
                continue
            if f["same_routing"] and not f["same_addr"]:
                continue
            if f["own_topic"] and (new != "Mqtt" or kind != "cluster-controller"):
                continue
            expected, rule, seed = _judge_put(policy, kind, old, new, f)
            rows.append((policy, kind, old, new, *flags, expected, rule, seed))
    return rows


def _judge_put(policy: str, kind: str, old: str, new: str, f: dict[str, bool]):
    for cond, outcome, rule, seed in PUT_CLAUSES[policy]:
        if cond == "matrix":
            allowed = MATRICES[policy][kind][(old, new)]
            return ("accept" if allowed else "refuse"), rule, seed
        hit = {"no_old": old == NONE, "always": True}.get(cond, f.get(cond))
        if hit:
            return outcome, rule, seed
    raise AssertionError(f"{policy}: clauses end without a verdict")


def delete_rule_rows() -> list[tuple]:
    """(policy, op, old_sticky, old_expired, expected, rule, seed) for rt.remove/rt.purge."""
    rows = []
    for (policy, op), clauses in DELETE_CLAUSES.items():
        for sticky, expired in product((False, True), repeat=2):
            f = {"old_sticky": sticky, "old_expired": expired, "not_expired": not expired,
                 "always": True}
            for cond, outcome, rule, seed in clauses:
                if f[cond]:
                    rows.append((policy, op, sticky, expired, outcome, rule, seed))
                    break
    return rows
