"""The first-come-first-served rule both lock tables grant by (``engine._runtime.locks.grants``).

Seed 002: Steps queue first come, first served behind earlier Steps wanting any of the same
keys, and a waiting Step holds nothing (so a later Step wanting other keys goes ahead).
"""

from __future__ import annotations

from engine._runtime.locks import grants


def test_free_keys_are_granted_in_arrival_order() -> None:
    assert grants([("a", ["x"]), ("b", ["y"])], {}) == [0, 1]


def test_a_held_key_keeps_its_waiter_waiting() -> None:
    assert grants([("a", ["x"])], {"x": "rpc"}) == []


def test_a_later_step_wanting_the_same_key_waits_behind_the_first() -> None:
    # a waits for x (held); b wants x and y: y is free, but b queues behind a on x.
    assert grants([("a", ["x"]), ("b", ["x", "y"])], {"x": "rpc"}) == []


def test_a_waiting_step_holds_nothing_so_others_go_ahead_on_other_keys() -> None:
    # a waits for x and y (x held); c wants only z: nothing blocks it.
    assert grants([("a", ["x", "y"]), ("c", ["z"])], {"x": "rpc"}) == [1]


def test_a_key_blocked_by_an_earlier_waiter_is_not_granted_even_when_free() -> None:
    # a waits (x held) and also wants y; b wants y, which is free, but a came first.
    assert grants([("a", ["x", "y"]), ("b", ["y"])], {"x": "rpc"}) == []


def test_a_grant_takes_its_keys_from_the_waiters_after_it() -> None:
    assert grants([("a", ["x"]), ("b", ["x"]), ("c", ["y"])], {}) == [0, 2]


def test_keys_a_waiter_already_holds_count_as_its_own() -> None:
    assert grants([("a", ["x", "y"])], {"x": "a"}) == [0]
