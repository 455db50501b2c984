"""Concurrency slots are short leases renewed while held: a slot dies with its holder, a waiter
blocks until a release (it does not poll), a wait has a deadline, and a waiter that dies stops
being counted. Real Redis throughout."""

from __future__ import annotations

import threading
import time

import pytest

from providers import limits

ARM = "lease-arm"


def score(token: str) -> float | None:
    return limits.get_connection().zscore(limits.slots_key(ARM), token)


def test_a_held_slot_is_renewed_and_a_released_one_is_not_brought_back():
    [token] = limits.acquire_slots(ARM, 1, 1)
    assert score(token) == pytest.approx(time.time() + limits.LEASE_S, abs=2)
    limits.get_connection().zadd(limits.slots_key(ARM), {token: time.time() + 1})  # nearly run out
    limits._held.renew()
    assert score(token) == pytest.approx(time.time() + limits.LEASE_S, abs=2)  # still held: renewed
    limits.release_slots(ARM, [token])
    limits._held.renew()
    assert score(token) is None


def test_a_dead_holders_slot_frees_up_when_its_lease_runs_out():
    # What a killed worker leaves: a slot whose lease nobody renews any more.
    limits.get_connection().zadd(limits.slots_key(ARM), {"dead-holder": time.time() - 0.1})
    assert len(limits.acquire_slots(ARM, 1, 1)) == 1


def test_a_waiter_blocks_until_a_release_instead_of_polling(monkeypatch):
    tries = []
    real_acquire = limits.acquire_slots
    monkeypatch.setattr(limits, "acquire_slots", lambda *args: tries.append(1) or real_acquire(*args))
    held = real_acquire(ARM, 1, 1)
    got = []
    waiter = threading.Thread(target=lambda: got.append(limits.wait_for_slot(ARM, 1)))
    waiter.start()
    time.sleep(2.5)  # a 10 ms poll would have tried about 250 times by now
    assert got == [] and len(tries) <= 5
    limits.release_slots(ARM, held)
    waiter.join(5)
    assert len(got) == 1 and len(got[0]) == 1


def test_a_wait_ends_at_its_deadline_with_capacity_timeout():
    limits.acquire_slots(ARM, 1, 1)
    with pytest.raises(limits.CapacityTimeout):
        limits.wait_for_slot(ARM, 1, deadline=time.monotonic() + 0.3)
    assert limits.waiting_for([ARM]) == limits.Waiting()  # no longer counted as waiting


def test_a_waiter_that_died_stops_being_counted():
    limits.get_connection().zadd(limits.waiting_key(ARM), {"dead-waiter": time.time() - 0.1})
    limits.get_connection().zadd(limits.waiting_key(ARM), {"live-waiter": time.time() + 5})
    assert limits.waiting_for([ARM]) == limits.Waiting(for_slot=1)


def test_a_release_wakes_only_live_waiters():
    held = limits.acquire_slots(ARM, 2, 2)
    limits.release_slots(ARM, held)  # nobody waits: no wake-up is left behind for later
    assert limits.get_connection().llen(limits.freed_key(ARM)) == 0
