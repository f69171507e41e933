"""The claim state machine of ``cronlock/scripts/job_*.lua``, on a job's state as a dict.

A SQL store holds a job's state as the same fields the Redis hash holds (all values
strings), reads it under a row lock, lets these functions decide, and writes it back in
the same transaction. Each function mutates ``state`` in place and returns its reply and
the history entries to append (field -> value, as the scripts' ``XADD`` writes them);
``now`` is the store's clock. Keep each function in step with its script: the store
conformance suite runs the same scenarios on Redis and on every SQL store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from cronlock.stores.types import (
    ClaimReply,
    ClaimStatus,
    FinishInfo,
    SlotClaim,
    TriggerClaim,
    TriggerReply,
    TriggerStatus,
)

__all__ = ["Step", "claim", "finish", "renew", "trigger"]

State = dict[str, str]
Event = dict[str, str]

_LEASE_END = re.compile(r":(\d+)$")
# An "r:<owner>" field: "slot:attempt:fence:holder:lease_until" (overlap "allow") or
# "slot:lease_until" (a triggered run).
_ALLOWED_RUN = re.compile(r"^(\d+):(\d+):(\d+):(.*):\d+$", re.DOTALL)
_TRIGGERED_RUN = re.compile(r"^(\d+):")
# "id|force|requested_ms|requested_by|expires_ms"; older versions' requests lack the last.
_REQUEST = re.compile(r"^([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|(\d+)$")
_REQUEST_V1 = re.compile(r"^([^|]*)\|([^|]*)\|([^|]*)\|(.*)$", re.DOTALL)
_FINISH_EVENTS = {"done": "succeeded", "failed": "failed", "handover": "cancelled"}


@dataclass
class Step:
    """What one decision answered, and the history entries it writes."""

    events: list[Event] = field(default_factory=list)


def _number(value: Optional[str]) -> Optional[int]:
    """Lua's ``tonumber`` for the integers we store; None when absent or not a number."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        try:
            return int(float(value))
        except ValueError:
            return None


def _other_runs(state: State, now: int, *, forget_lapsed: bool) -> int:
    """The latest lease end of the runs kept under ``r:<owner>`` fields (0 if none);
    lapsed ones are dropped when ``forget_lapsed``."""
    latest = 0
    for name in [f for f in state if f.startswith("r:")]:
        match = _LEASE_END.search(state[name])
        until = int(match.group(1)) if match else None
        if until is None or until <= now:
            if forget_lapsed:
                del state[name]
        elif until > latest:
            latest = until
    return latest


def claim(state: State, now: int, c: SlotClaim, step: Step) -> ClaimReply:
    """``job_claim.lua``: claim slot ``c.slot_ms`` of a job."""
    if state.get("paused") == "1":
        return ClaimReply(ClaimStatus.PAUSED)
    raw_slot = state.get("slot")
    cur = _number(raw_slot)
    if raw_slot is not None and cur is None:
        return ClaimReply(ClaimStatus.CORRUPT, detail="slot")
    decision = _Claim(state, now, c, step)
    if cur is not None and c.slot_ms < cur:
        return ClaimReply(ClaimStatus.STALE, detail=str(cur))
    if cur is not None and c.slot_ms == cur:
        return decision.same_slot()
    if c.recheck:
        # told this slot was running, yet the state is gone or names an older one: the
        # store forgot it, and a re-check never starts a slot afresh
        return ClaimReply(ClaimStatus.GONE)
    return decision.start(1) if cur is None else decision.newer_slot()


class _Claim:
    """One claim's decision, on the state as it was read."""

    def __init__(self, state: State, now: int, c: SlotClaim, step: Step) -> None:
        self.state, self.now, self.c, self.step = state, now, c, step
        self.raw_slot = state.get("slot")
        self.status = state.get("status")
        self.attempt = _number(state.get("attempt")) or 0
        self.lease = _number(state.get("lease")) or 0
        self.fence = _number(state.get("fence")) or 0
        self.history = c.retention.max_entries > 0
        self.ended: list[tuple[int, int]] = []  # older runs recorded as ended (slot, attempt)

    def vanished(self, event: str, run: tuple[str, ...], kind: str) -> None:
        """An older run (slot, attempt, fence, holder) whose lease lapsed unfinished: a
        failure, a history entry, and a pair in the reply."""
        state, (slot, attempt, fence, holder) = self.state, run
        state.update(last_failed=slot, failed_at=str(self.now), last_error=event)
        state["failures"] = str((_number(state.get("failures")) or 0) + 1)
        if self.history:
            self.step.events.append(
                {"event": event, "slot": slot, "attempt": attempt, "fence": fence}
                | {"holder": holder, "kind": kind}
            )
        self.ended.append((int(slot), int(attempt)))

    def sweep(self) -> int:
        """Record as ended the runs under ``r:<owner>`` fields whose lease lapsed; the
        latest lease end of the live ones (0 if none)."""
        state, now, latest = self.state, self.now, 0
        for name in [f for f in state if f.startswith("r:")]:
            value = state[name]
            match = _LEASE_END.search(value)
            until = int(match.group(1)) if match else None
            if until is None or until <= now:
                del state[name]
                allowed = _ALLOWED_RUN.match(value)
                triggered = _TRIGGERED_RUN.match(value)
                if allowed:
                    self.vanished("abandoned", allowed.groups(), "scheduled")
                elif until is not None and triggered:
                    self.vanished("abandoned", (triggered.group(1), "1", "0", ""), "manual")
            elif until > latest:
                latest = until
        return latest

    def previous(self, event: str) -> None:
        """An entry about the run the state held before this claim."""
        if self.history:
            self.step.events.append(
                {
                    "event": event,
                    "slot": self.raw_slot or "",
                    "attempt": str(self.attempt),
                    "fence": str(self.fence),
                    "holder": self.state.get("holder", ""),
                    "lease": str(self.lease),
                    "kind": "scheduled",
                }
            )

    def start(self, n: int) -> ClaimReply:
        c, fence, until = self.c, self.fence + 1, self.now + self.c.lease_ms
        self.state.update(
            slot=str(c.slot_ms),
            status="running",
            attempt=str(n),
            owner=c.owner,
            lease=str(until),
            fence=str(fence),
            holder=c.holder,
            started=str(self.now),
        )
        if self.history:
            self.step.events.append(
                {
                    "event": "running",
                    "slot": str(c.slot_ms),
                    "attempt": str(n),
                    "fence": str(fence),
                    "holder": c.holder,
                    "started": str(self.now),
                    "lease": str(until),
                    "kind": "scheduled",
                }
            )
        return ClaimReply(
            ClaimStatus.WON,
            attempt=n,
            fence=fence,
            lease_until_ms=until,
            ended=tuple(self.ended),
        )

    def same_slot(self) -> ClaimReply:
        state, now, c = self.state, self.now, self.c
        if self.status != "running":
            return ClaimReply(ClaimStatus.DONE, detail=self.status or "done")
        if state.get("owner") == c.owner:
            # our own claim again (the first reply was lost): the lease starts again now
            until = now + c.lease_ms
            state["lease"] = str(until)
            return ClaimReply(
                ClaimStatus.WON, attempt=self.attempt, fence=self.fence, lease_until_ms=until
            )
        if self.lease > now:
            return ClaimReply(
                ClaimStatus.TAKEN,
                lease_until_ms=self.lease,
                attempt=self.attempt,
                server_now_ms=now,
            )
        if self.attempt >= c.max_attempts:
            state.update(
                status="failed",
                owner="",
                finished=str(now),
                last_failed=str(c.slot_ms),
                failed_at=str(now),
                last_error="abandoned",
                failures=str((_number(state.get("failures")) or 0) + 1),
            )
            self.previous("abandoned")
            return ClaimReply(ClaimStatus.EXHAUSTED, attempt=self.attempt)
        self.previous("taken_over")
        return self.start(self.attempt + 1)

    def newer_slot(self) -> ClaimReply:
        """Record lapsed older runs as ended; under "skip" a live one makes the new slot
        wait."""
        state, now, overlap = self.state, self.now, self.c.overlap
        other_until = self.sweep()
        running = self.status == "running"
        if running and self.lease > now:
            if overlap == "skip":
                return self.busy(self.lease)
            if overlap == "allow":
                state["r:" + state.get("owner", "")] = (
                    f"{self.raw_slot}:{self.attempt}:{self.fence}:{state.get('holder', '')}:"
                    f"{state.get('lease', '')}"
                )
            else:
                self.previous("replaced")
        elif overlap == "skip" and other_until > now:
            return self.busy(other_until)
        elif running:
            run = (self.raw_slot or "", str(self.attempt), str(self.fence))
            self.vanished("expired", (*run, state.get("holder", "")), "scheduled")
        return self.start(1)

    def busy(self, until: int) -> ClaimReply:
        return ClaimReply(
            ClaimStatus.BUSY, lease_until_ms=until, server_now_ms=self.now, ended=tuple(self.ended)
        )


def renew(state: State, now: int, slot_ms: int, owner: str, lease_ms: int) -> Optional[int]:
    """``job_renew.lua``: the lease's new end, or None when this owner lost the slot."""
    until = now + lease_ms
    if _is_owner(state, slot_ms, owner):
        state["lease"] = str(until)
        return until
    name = "r:" + owner
    if state.get(name, "").startswith(f"{slot_ms}:"):
        # keep what the field records of the run; only its lease ends later
        state[name] = _LEASE_END.sub(f":{until}", state[name])
        return until
    return None


def _is_owner(state: State, slot_ms: int, owner: str) -> bool:
    return (
        state.get("slot") == str(slot_ms)
        and state.get("status") == "running"
        and state.get("owner") == owner
    )


def finish(
    state: State,
    now: int,
    slot_ms: int,
    owner: str,
    outcome: str,
    *,
    info: FinishInfo,
    step: Step,
    history: bool,
) -> bool:
    """``job_finish.lua``: record a run's end; False (nothing written) when not ours."""
    name = "r:" + owner
    if _is_owner(state, slot_ms, owner):
        if outcome == "handover":
            state["lease"] = str(now)
        else:
            state.update(status=outcome, owner="", lease=str(now), finished=str(now))
            _summary(state, now, slot_ms, outcome, info)
    elif state.get(name, "").startswith(f"{slot_ms}:"):
        del state[name]
        _summary(state, now, slot_ms, outcome, info)
    else:
        return False
    if history:
        step.events.append(
            {
                "event": _FINISH_EVENTS.get(outcome, outcome),
                "slot": str(slot_ms),
                "attempt": str(info.attempt),
                "fence": str(info.fence),
                "holder": info.holder,
                "finished": str(now),
                "duration_ms": str(info.duration_ms),
                "error_type": info.error_type,
                "traceback": info.traceback,
                "kind": str(info.kind),
            }
        )
    return True


def _summary(state: State, now: int, slot_ms: int, outcome: str, info: FinishInfo) -> None:
    """The alerting fields (``last_done``, ``failures`` ...) the finish script keeps."""
    if outcome == "done":
        state.update(last_done=str(slot_ms), done_at=str(now), failures="0")
    elif outcome == "failed":
        state.update(
            last_failed=str(slot_ms),
            failed_at=str(now),
            last_error=info.error_type,
            failures=str((_number(state.get("failures")) or 0) + 1),
        )


def trigger(
    state: State, now: int, request: Optional[str], c: TriggerClaim, step: Step
) -> TriggerReply:
    """``job_trigger.lua``: start the popped manual-run ``request`` if allowed."""
    if request is None:
        return TriggerReply(TriggerStatus.NONE)
    parsed = _REQUEST.match(request)
    expires: Optional[str] = None
    if parsed is not None:
        trigger_id, force, requested, by, expires = parsed.groups()
    else:
        parsed = _REQUEST_V1.match(request)
        if parsed is None:
            return TriggerReply(TriggerStatus.CORRUPT, trigger_id="trigger")
        trigger_id, force, requested, by = parsed.groups()

    def history(**fields: str) -> None:
        if c.retention.max_entries > 0:
            step.events.append(
                {
                    "kind": "manual",
                    "trigger": trigger_id,
                    "requested": requested,
                    "requested_by": by,
                    **fields,
                }
            )

    if expires is not None and now >= int(expires):
        history(event="skipped", reason="expired", holder=c.holder, expires=expires)
        return TriggerReply(TriggerStatus.EXPIRED, trigger_id=trigger_id)
    if force != "1":
        if state.get("paused") == "1":
            history(event="skipped", reason="paused", holder=c.holder)
            return TriggerReply(TriggerStatus.PAUSED, trigger_id=trigger_id)
        if c.overlap == "skip":
            lease = _number(state.get("lease")) or 0
            live = state.get("status") == "running" and lease > now
            if live or _other_runs(state, now, forget_lapsed=False) > now:
                history(event="skipped", reason="busy", holder=c.holder)
                return TriggerReply(TriggerStatus.BUSY, trigger_id=trigger_id)
    fence = (_number(state.get("fence")) or 0) + 1
    until = now + c.lease_ms
    state["fence"] = str(fence)
    state["r:" + c.owner] = f"{now}:{until}"
    history(
        event="running",
        slot=str(now),
        attempt="1",
        fence=str(fence),
        holder=c.holder,
        started=str(now),
        lease=str(until),
    )
    return TriggerReply(
        TriggerStatus.WON, slot_ms=now, fence=fence, lease_until_ms=until, trigger_id=trigger_id
    )
