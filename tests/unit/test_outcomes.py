"""One name per fact: every status and outcome Enum member maps to its stored word, and back."""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path

import pytest

from cronlock.observers import RunRecord
from cronlock.outcomes import (
    RUN_OUTCOMES,
    ClaimStatus,
    HistoryEvent,
    RunKind,
    RunOutcome,
    SlotStatus,
    TriggerStatus,
    outcome_of_event,
    outcome_of_finish,
)

SCRIPTS = Path(__file__).resolve().parents[2] / "cronlock" / "scripts"
ENUMS: list[type[Enum]] = [
    ClaimStatus,
    TriggerStatus,
    SlotStatus,
    RunOutcome,
    HistoryEvent,
    RunKind,
]


def _script(name: str) -> str:
    return (SCRIPTS / f"{name}.lua").read_text()


def _replies(name: str) -> set[str]:
    """The first word of every reply a script returns."""
    return set(re.findall(r"return (?:with_ended\()?\{'(\w+)'", _script(name)))


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_members_are_their_words(enum: type[Enum]) -> None:
    """Each member equals, prints as, serialises to and parses back from its word."""
    for member in enum:
        word = member.value
        assert member == word
        assert str(member) == word
        assert f"{member}" == word
        assert json.dumps(member) == json.dumps(word)
        assert enum(word) is member


def test_every_run_outcome_has_one_row_of_words() -> None:
    """The table covers each RunOutcome once; finish words and history events map back."""
    assert set(RUN_OUTCOMES) == set(RunOutcome)
    for outcome, words in RUN_OUTCOMES.items():
        if words.finish is not None:
            assert outcome_of_finish(words.finish) is outcome
        if words.history is not None:
            assert outcome_of_event(words.history.value) is outcome
    assert RUN_OUTCOMES[RunOutcome.SUCCEEDED].finish == "done"
    assert RUN_OUTCOMES[RunOutcome.CANCELLED].finish == "handover"
    with pytest.raises(ValueError, match="'succeeded'"):
        outcome_of_finish("succeeded")  # the finish script is told "done"
    assert outcome_of_event("taken_over") is None
    assert outcome_of_event("not-an-event") is None


def test_the_finish_script_maps_outcomes_to_the_tables_events() -> None:
    """job_finish.lua's outcome -> event table is exactly RUN_OUTCOMES' finish -> history."""
    match = re.search(r"local event = \(\{([^}]*)\}\)", _script("job_finish"))
    assert match is not None
    lua = dict(re.findall(r"(\w+) = '(\w+)'", match.group(1)))
    table = {w.finish: w.history for w in RUN_OUTCOMES.values() if w.finish is not None}
    assert lua == {finish: str(event) for finish, event in table.items()}


def test_claim_and_trigger_replies_are_the_enums_words() -> None:
    """Every reply word of the claim and trigger scripts is a member, and every member a word."""
    assert _replies("job_claim") == {s.value for s in ClaimStatus} - {"unreplicated"}
    assert _replies("job_trigger") == {s.value for s in TriggerStatus}


def test_history_events_written_by_the_scripts_are_the_enums_words() -> None:
    """Every event a script appends is a HistoryEvent, and every HistoryEvent is appended."""
    claim, trigger, finish = _script("job_claim"), _script("job_trigger"), _script("job_finish")
    written = set(re.findall(r"(?:previous|vanished)\('(\w+)'", claim))
    written |= set(re.findall(r"'event', '(\w+)'", claim + trigger))
    finish_table = re.search(r"local event = \(\{([^}]*)\}\)", finish)
    assert finish_table is not None
    written |= set(re.findall(r"= '(\w+)'", finish_table.group(1)))
    # "restored" is written by the stores' restore (Python), not by a script
    restore = (SCRIPTS.parent / "stores" / "redis" / "intent.py").read_text()
    assert "HistoryEvent.RESTORED" in restore
    assert written | {"restored"} == {e.value for e in HistoryEvent}
    assert {e for e in HistoryEvent if not e.ends_run} == {
        HistoryEvent.RUNNING,
        HistoryEvent.SKIPPED,
        HistoryEvent.RESTORED,
    }


def test_slot_states_written_by_the_scripts_are_the_enums_words() -> None:
    """The job state's status words (claim writes running/failed, finish done/failed)."""
    claim = _script("job_claim")
    written = set(re.findall(r"'HSET', key,[^)]*'status', '(\w+)'", claim))
    written |= {str(w.slot) for w in RUN_OUTCOMES.values() if w.slot is not None}
    assert written == {s.value for s in SlotStatus}


def test_a_run_records_holder_is_still_readable_as_owner() -> None:
    """`RunRecord.holder` is the host:pid of the run; `owner` reads it, with a warning."""
    now = datetime(2030, 1, 1, tzinfo=timezone.utc)
    record = RunRecord("k", now, 1, 7, "host:1:r", "r", RunOutcome.SUCCEEDED, now, now)
    assert record.holder == "host:1:r"
    assert record.status == "succeeded"
    with pytest.warns(DeprecationWarning, match="holder"):
        assert record.owner == "host:1:r"
