"""``cronlock exec --slot`` arithmetic: which occurrence, the grace, the timezone, the words."""

from __future__ import annotations

import argparse
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import pytest

from cronlock._scripts import SCRIPTS_DIR
from cronlock.cli import _exec_slot
from cronlock.cli._exec_slot import DEFAULT_GRACE, SlotClaim, host_zone, plan_of
from cronlock.errors import ConfigurationError


def ms(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def options(
    slot: Optional[str] = "*/5 * * * *",
    grace: Optional[float] = None,
    zone: Optional[str] = "UTC",
) -> argparse.Namespace:
    return argparse.Namespace(
        key="k", prefix="cronlock", slot=slot, slot_grace=grace, timezone=zone
    )


def test_the_occurrence_is_the_latest_at_or_before_now() -> None:
    """At 10:07:30 a */5 line is for 10:05:00, passed to the command as ISO UTC."""
    plan = plan_of(options(), ms("2024-05-01T10:07:30+00:00"))
    assert plan is not None
    assert plan.occurrence == "2024-05-01T10:05:00Z"
    assert plan.grace_ms == DEFAULT_GRACE * 1000


def test_the_grace_bounds_how_late_a_firing_may_run() -> None:
    """Within the grace (inclusive) the occurrence may run; a millisecond later it may not."""
    start = ms("2024-05-01T10:05:00+00:00")
    plan = plan_of(options(grace=60), start)
    assert plan is not None
    assert plan.late(start + 60_000) is None
    late = plan.late(start + 60_001)
    assert late is not None
    assert "beyond --slot-grace 60 s" in late


def test_the_default_timezone_is_the_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --timezone, $TZ decides: 02:30 in Athens (winter) is 00:30 UTC."""
    monkeypatch.setenv("TZ", "Europe/Athens")
    assert host_zone() == "Europe/Athens"
    plan = plan_of(options(slot="30 2 * * *", zone=None), ms("2024-01-15T00:30:20+00:00"))
    assert plan is not None
    assert plan.occurrence == "2024-01-15T00:30:00Z"


def test_without_tz_the_zone_comes_from_localtime(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """$TZ unset: /etc/localtime's zone name; no such file: UTC."""
    monkeypatch.delenv("TZ", raising=False)
    link = tmp_path / "localtime"
    link.symlink_to("/usr/share/zoneinfo/Asia/Tokyo")
    monkeypatch.setattr(_exec_slot, "LOCALTIME", str(link))
    assert host_zone() == "Asia/Tokyo"
    monkeypatch.setattr(_exec_slot, "LOCALTIME", str(tmp_path / "missing"))
    assert host_zone() == "UTC"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (options(slot="bogus"), "--slot: cron expression 'bogus'"),
        (options(grace=-1), "--slot-grace must be >= 0; got -1"),
        (options(zone="Mars/Base"), "--timezone: unknown timezone 'Mars/Base'"),
        (options(slot=None, grace=5), "--slot-grace 5 needs --slot"),
        (options(slot=None, zone="UTC"), "--timezone 'UTC' needs --slot"),
    ],
)
def test_bad_options_are_refused_naming_the_value(args: argparse.Namespace, named: str) -> None:
    """Each bad or orphaned --slot option raises ConfigurationError naming it."""
    with pytest.raises(ConfigurationError, match=re.escape(named)):
        plan_of(args, 0)


def test_no_slot_means_no_plan() -> None:
    """Without --slot (and its options) exec is the plain mutex."""
    assert plan_of(options(slot=None, zone=None), 0) is None


def test_the_claim_scripts_reply_words_are_the_enum() -> None:
    """Every word exec_slot_claim.lua replies with is a SlotClaim, and every SlotClaim a word."""
    source = (SCRIPTS_DIR / "exec_slot_claim.lua").read_text()
    words = set(re.findall(r"return \{'(\w+)'", source))
    assert words == {w.value for w in SlotClaim}


def test_refusals_say_why() -> None:
    """Each refused claim gets a message naming the occurrence or the record."""
    plan = plan_of(options(), ms("2024-05-01T10:07:30+00:00"))
    assert plan is not None
    later = str(ms("2024-05-01T10:10:00+00:00"))
    assert "already claimed" in str(plan.refusal(SlotClaim.DONE, ""))
    assert "2024-05-01T10:10:00Z" in str(plan.refusal(SlotClaim.STALE, later))
    assert "lost" in str(plan.refusal(SlotClaim.LOST, ""))
    assert "cronlock:slot:{k}" in str(plan.refusal(SlotClaim.CORRUPT, "x"))
    assert datetime.fromisoformat(plan.occurrence.replace("Z", "+00:00")).tzinfo == timezone.utc
