"""Turns (apps/controller/turns.py): the objects of a batch decide in the batch's order,
whichever worker reaches its turn first, and a place that never decides lets the next go."""

from __future__ import annotations

import random
import threading

import pytest

from nodeau.apps.controller.turns import Turns


def test_workers_that_arrive_in_any_order_decide_in_the_batchs_order() -> None:
    count = 12
    turns = Turns(count)
    order: list[int] = []
    lock = threading.Lock()
    arrivals = list(range(count))
    random.Random(7).shuffle(arrivals)
    started = threading.Barrier(count)

    def decide(place: int) -> None:
        turn = turns.turn(place)
        started.wait()
        turn.wait()
        with lock:
            order.append(place)
        turn.done()

    threads = [threading.Thread(target=decide, args=(p,)) for p in arrivals]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert order == list(range(count))


def test_a_place_done_out_of_order_lets_the_next_go_once_those_before_it_are() -> None:
    turns = Turns(3)
    turns.turn(1).done()  # the second object will not decide (it was decided already)
    released = threading.Event()

    def third() -> None:
        turns.turn(2).wait()
        released.set()

    waiting = threading.Thread(target=third)
    waiting.start()
    assert not released.wait(timeout=0.2)  # the first has not decided yet
    turns.turn(0).done()
    assert released.wait(timeout=5)
    waiting.join(timeout=5)
    turns.turn(0).done()  # idempotent
    turns.turn(0).wait()  # the first place never waits


def test_a_place_outside_the_batch_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="no place 3 in a batch of 3"):
        Turns(3).turn(3)
    with pytest.raises(ValueError, match="no place -1 in a batch of 3"):
        Turns(3).turn(-1)
