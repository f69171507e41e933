"""Group commit: calls arriving while a batch is in flight go together in the next one."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest

from cronlock.stores.coalesce import Coalescer
from cronlock.testing import wait_until


class Sender:
    """Answers each call with its double; the first batch waits until released."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.release_first = threading.Event()

    def __call__(self, calls: Sequence[int]) -> list[Any]:
        self.batches.append(list(calls))
        if len(self.batches) == 1:
            assert self.release_first.wait(10)
        return [ValueError(f"odd {c}") if c == 13 else c * 2 for c in calls]


def start(coalescer: Coalescer[int], value: int, replies: dict[int, Any]) -> threading.Thread:
    def call() -> None:
        try:
            replies[value] = coalescer.call(value)
        except ValueError as error:
            replies[value] = error

    thread = threading.Thread(target=call)
    thread.start()
    return thread


def test_calls_that_arrive_during_a_batch_go_together_in_the_next() -> None:
    sender = Sender()
    coalescer = Coalescer(sender)
    replies: dict[int, Any] = {}
    threads = [start(coalescer, 1, replies)]
    wait_until(lambda: sender.batches == [[1]], timeout=10)
    threads += [start(coalescer, v, replies) for v in (2, 3, 13, 4)]
    wait_until(lambda: coalescer.waiting() == 4, timeout=10)
    sender.release_first.set()
    for thread in threads:
        thread.join(10)
    assert sender.batches[0] == [1]
    assert sorted(sender.batches[1]) == [2, 3, 4, 13]
    assert len(sender.batches) == 2
    assert {k: v for k, v in replies.items() if k != 13} == {1: 2, 2: 4, 3: 6, 4: 8}
    assert str(replies[13]) == "odd 13"  # the exception in its place, to its own caller


def test_a_lone_call_is_sent_at_once_and_gets_its_reply() -> None:
    sender = Sender()
    sender.release_first.set()
    coalescer = Coalescer(sender)
    assert coalescer.call(21) == 42
    assert coalescer.call(5) == 10
    assert sender.batches == [[21], [5]]


def test_a_batch_that_fails_fails_every_call_in_it() -> None:
    def send(calls: Sequence[int]) -> list[Any]:
        raise ConnectionError(f"down: {list(calls)}")

    coalescer = Coalescer(send)
    with pytest.raises(ConnectionError, match=r"down: \[7\]"):
        coalescer.call(7)
    assert coalescer.waiting() == 0
