"""The ids a run hands out that are nobody's choice: message ids, subscription ids, the
WebSocket tokens of libjoynr runtimes, the keys that tell in-process addresses apart.

A simulated run is reproduced from its seed, byte for byte, and each of these ids shows up
in trace lines: one drawn from the operating system's entropy would make every run differ.
Within ``seeded_ids(seed)`` they come from one generator seeded from the run's seed. The
generator is held by a context variable, so every task started inside the block (each
inherits a copy of the context) draws from the same one, in the order the loop runs them;
outside such a block they are ``uuid4`` and ``secrets`` as before, and a token stays a
secret.
"""

from __future__ import annotations

import random
import secrets
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_generator: ContextVar[random.Random | None] = ContextVar("joynr_sim_ids", default=None)


def uuid_from(rng: random.Random) -> str:
    """A version-4 UUID whose 122 random bits come from ``rng``."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def new_uuid() -> str:
    """A message or subscription id: from the run's generator when the run is seeded."""
    rng = _generator.get()  # one lookup per id: every message makes one
    return str(uuid.uuid4()) if rng is None else str(uuid.UUID(int=rng.getrandbits(128), version=4))


def new_hex(nbytes: int) -> str:
    """``nbytes`` random bytes as hex (a token): ``secrets`` unless the run is seeded."""
    rng = _generator.get()
    if rng is None:
        return secrets.token_hex(nbytes)
    return rng.getrandbits(8 * nbytes).to_bytes(nbytes, "big").hex() if nbytes > 0 else ""


def ids_seeded() -> bool:
    """Whether ids drawn here come from a run's seeded generator."""
    return _generator.get() is not None


@contextmanager
def seeded_ids(seed: int | str) -> Iterator[random.Random]:
    """Ids drawn within the block (and in tasks started in it) come from a generator
    seeded from ``seed``; the one before is back afterwards."""
    rng = random.Random(f"{seed}/ids")
    token = _generator.set(rng)
    try:
        yield rng
    finally:
        _generator.reset(token)
