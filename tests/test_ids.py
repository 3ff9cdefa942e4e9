"""The ids nobody chooses (message and subscription ids, tokens, in-process address keys):
the same sequence for the same seed, in the tasks of a seeded block too; random outside."""

from __future__ import annotations

import asyncio
import random
import uuid

from joynr_sim.core.address import InProcessAddress, describe
from joynr_sim.core.ids import new_hex, new_uuid, seeded_ids, uuid_from
from joynr_sim.core.message import REQUEST, JoynrMessage
from joynr_sim.runtime.participants import ProviderSkeleton, ProxySkeleton


def draws() -> list[str]:
    return [new_uuid(), new_hex(16), JoynrMessage(REQUEST, "a", "b", 1).id, new_hex(3)]


def test_a_seed_gives_the_same_ids_and_another_seed_others():
    with seeded_ids(7):
        first = draws()
    with seeded_ids(7):
        again = draws()
    with seeded_ids("8"):
        other = draws()
    assert first == again and set(first).isdisjoint(other)
    msg_id, token, short = first[2], first[1], first[3]
    assert uuid.UUID(first[0]).version == uuid.UUID(msg_id).version == 4
    assert len(token) == 32 and int(token, 16) >= 0 and len(short) == 6


def test_outside_a_seeded_block_ids_are_random_and_the_block_ends_cleanly():
    with seeded_ids(7):
        with seeded_ids(9):
            inner = new_uuid()
        outer = new_uuid()
    with seeded_ids(9):
        assert new_uuid() == inner  # the inner block left the outer's generator alone
    with seeded_ids(7):
        assert new_uuid() == outer
    assert new_uuid() != new_uuid() and new_hex(16) != new_hex(16)
    assert uuid.UUID(new_uuid()).version == 4 and len(new_hex(0)) == 0


async def test_tasks_started_in_a_seeded_block_draw_from_its_generator():
    async def run() -> list[str]:
        with seeded_ids(3):
            ids = [new_uuid()]
            ids += await asyncio.gather(*(asyncio.create_task(one()) for _ in range(3)))
            return ids

    async def one() -> str:
        await asyncio.sleep(0)
        return new_uuid()

    first = await run()
    assert first == await run() and len(set(first)) == 4


def test_uuid_from_a_generator_is_a_version_4_uuid():
    a, b = uuid_from(random.Random(1)), uuid_from(random.Random(1))
    assert a == b and uuid.UUID(a).version == 4


def test_skeletons_name_their_in_process_address_from_the_seed():
    def targets() -> list[str]:
        provider = ProviderSkeleton("p", "d", "joynrsim/Echo", object())
        proxy = ProxySkeleton("px", "joynrsim/Echo", "p")
        return [describe(InProcessAddress(s)) for s in (provider, proxy, provider)]

    with seeded_ids(1):
        first = targets()
    with seeded_ids(1):
        assert targets() == first
    assert first[0] == first[2] != first[1] and first[0].startswith("inprocess:") and len(first[0]) == 26
    assert targets()[0] != targets()[0]  # unseeded: two skeletons, two keys
