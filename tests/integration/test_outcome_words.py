"""The outcome table against a real server: each finish word leaves the job state and the
history event that `RUN_OUTCOMES` names, and reads back as its RunOutcome."""

from __future__ import annotations

import pytest
import redis

from cronlock._claims import ClaimRequest, FinishInfo, HistoryOptions, claim, finish
from cronlock._keys import history_key, job_key
from cronlock.history import read_history
from cronlock.outcomes import (
    RUN_OUTCOMES,
    ClaimStatus,
    HistoryEvent,
    RunOutcome,
    SlotStatus,
    outcome_of_event,
)

PREFIX = "words"
SLOT_MS = 1_800_000_000_000
FINISHED = [o for o, w in RUN_OUTCOMES.items() if w.finish is not None]


@pytest.mark.parametrize("outcome", FINISHED, ids=str)
def test_a_finish_stores_the_tables_words(client: redis.Redis, outcome: RunOutcome) -> None:
    """Claim, finish with the table's word: state status, history event, and back."""
    key = f"job-{outcome}"
    state, stream = job_key(PREFIX, key), history_key(PREFIX, key)
    history = HistoryOptions(stream, 10)
    request = ClaimRequest(state, SLOT_MS, "token", 60_000, 3, "skip", "host:1:r", history)
    assert claim(client, request).status is ClaimStatus.WON
    words = RUN_OUTCOMES[outcome]
    assert words.finish is not None
    info = FinishInfo(attempt=1, fence=1, holder="host:1:r")
    assert finish(client, state, SLOT_MS, "token", words.finish, history=history, info=info)
    status = client.hget(state, "status")
    expected = SlotStatus.RUNNING if words.slot is None else words.slot
    assert SlotStatus(status.decode() if isinstance(status, bytes) else status) is expected
    end, start = read_history(client, PREFIX, key, limit=2)
    assert HistoryEvent(start.event) is HistoryEvent.RUNNING
    assert HistoryEvent(end.event) is words.history
    assert outcome_of_event(end.event) is outcome
    assert end.holder == "host:1:r"
