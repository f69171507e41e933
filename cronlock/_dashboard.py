"""The dashboard page without a web framework: what it shows, rendered from its template.

The page is ``cronlock/templates/cronlock/dashboard.html`` (Jinja2) with
``cronlock/static/dashboard.{css,js}``. [`dashboard_context`][cronlock._dashboard.dashboard_context]
reads what the page shows from an [`Admin`][cronlock.admin.Admin];
[`render`][cronlock._dashboard.render] fills the template with it. The Django views use
both; they need ``jinja2`` (in the ``django`` extra), not Flask.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

import jinja2
import redis

from cronlock.outcomes import HistoryEvent

__all__ = ["STATIC_FILES", "dashboard_context", "render"]

PACKAGE = Path(__file__).resolve().parent
#: The files the page loads from ``<static>/``, with their content types.
STATIC_FILES = {"dashboard.css": "text/css", "dashboard.js": "text/javascript"}
HISTORY = 40  # entries in the dashboard's "recent runs"
HISTORY_PER_JOB = 10
END_EVENTS = frozenset(e.value for e in HistoryEvent if e.ends_run)

_environment: Any = None


def dashboard_context(
    admin: Any, health: Callable[[], tuple[bool, dict[str, Any]]]
) -> dict[str, Any]:
    """What the page shows: jobs, their last outcome, recent runs, runners, schedules, health.

    ``health()`` returns ``(ok, report)``; a Redis error there shows as unhealthy.
    Redis errors reading the rest propagate (the caller answers 503).
    """
    job_list = admin.jobs()
    recent: list[Any] = []
    last_end: dict[str, Any] = {}
    for status in job_list[:50]:
        entries = admin.history(status.key, HISTORY_PER_JOB)
        recent.extend(entries)
        last_end[status.key] = next((e for e in entries if e.event in END_EVENTS), None)
    # A "running" entry followed by its end says nothing the end does not: drop it.
    ended = {(e.key, e.slot, e.attempt) for e in recent if e.event in END_EVENTS}
    recent = [e for e in recent if e.event != "running" or (e.key, e.slot, e.attempt) not in ended]
    recent.sort(key=lambda e: e.at, reverse=True)
    try:
        healthy, report = health()
    except redis.RedisError as exc:
        healthy, report = False, {"problems": [str(exc)]}
    runners = admin.runners()
    return {
        "jobs": job_list,
        "last_end": last_end,
        "recent": recent[:HISTORY],
        "runners": runners,
        "handled_tasks": {task for runner in runners for task in runner.tasks},
        "schedules": admin.list_schedules(),
        "healthy": healthy,
        "health": report,
        "now": datetime.now(timezone.utc),
        "fmt": fmt,
        "ago": ago,
    }


def render(context: dict[str, Any]) -> str:
    """The page: ``dashboard.html`` filled with ``context``.

    ``context`` holds `dashboard_context`'s keys plus ``title``, ``authorized``,
    ``token_auth``, ``api`` and ``static`` (URL prefixes without a trailing slash), and
    optionally ``csrf_header`` and ``csrf_token``, sent by the page's script with every
    request it makes.
    """
    global _environment  # noqa: PLW0603 - one Jinja2 environment per process, made on first use
    if _environment is None:
        _environment = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(PACKAGE / "templates")),
            autoescape=True,
        )
    page: str = _environment.get_template("cronlock/dashboard.html").render(**context)
    return page


def static_file(name: str) -> Optional[tuple[bytes, str]]:
    """The bytes and content type of one of the page's `STATIC_FILES`, else None."""
    content_type = STATIC_FILES.get(name)
    if content_type is None:
        return None
    return (PACKAGE / "static" / name).read_bytes(), content_type


def fmt(value: Optional[datetime]) -> str:
    """A datetime as ``YYYY-MM-DD HH:MM:SS`` UTC, or an em dash."""
    if value is None:
        return "—"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def ago(value: Optional[datetime], now: datetime) -> str:
    """``in 3 s`` / ``5 min ago`` relative to ``now``."""
    if value is None:
        return ""
    seconds = (value - now).total_seconds()
    amount = abs(seconds)
    if amount < 90:
        text = f"{amount:.0f} s"
    elif amount < 5400:
        text = f"{amount / 60:.0f} min"
    elif amount < 172800:
        text = f"{amount / 3600:.0f} h"
    else:
        text = f"{amount / 86400:.0f} d"
    return f"in {text}" if seconds >= 0 else f"{text} ago"
