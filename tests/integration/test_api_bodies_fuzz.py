"""Hypothesis over the management API's request bodies: a bad field is a 400 naming it.

For each mutation route, a body with one field of the wrong type or value, or one field
the route does not know, is answered 400 with a JSON error whose message names that
field, and the store is left as it was. Flask's test client, a real Redis; bounded for
the fast suite.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronlock.schedules import CronSchedule
from cronlock.testing import RedisServer
from tests.integration.test_flask_api import Setup, make_setup

__all__ = ["make_setup"]  # the fixture, shared with test_flask_api

pytest.importorskip("flask")

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=5,
)
NOT_BOOL = JSON.filter(lambda v: not isinstance(v, bool))
BAD_SECONDS = st.one_of(
    JSON.filter(lambda v: isinstance(v, bool) or not isinstance(v, (int, float))),
    st.floats(max_value=0, allow_nan=False),
    st.floats(min_value=1e306, allow_infinity=False),
)


def _cron(text: str) -> None:
    CronSchedule(text)


def _zone(name: str) -> None:
    CronSchedule("0 * * * *", timezone=name)


def _refused(check: Callable[[str], None]) -> Callable[[str], bool]:
    """True for a value ``check`` refuses (what the fuzz needs for a bad field)."""

    def refused(value: str) -> bool:
        try:
            check(value)
        except (ValueError, TypeError):
            return True
        return False

    return refused


#: route -> (its known fields, a strategy of (field, bad value) pairs)
ROUTES: dict[str, tuple[set[str], Any]] = {
    "/jobs/report/trigger": (
        {"force", "expires"},
        st.one_of(
            st.tuples(st.just("force"), NOT_BOOL), st.tuples(st.just("expires"), BAD_SECONDS)
        ),
    ),
    "/jobs/report/pause": ({"force"}, st.tuples(st.just("force"), NOT_BOOL)),
    "/jobs/report/resume": (set(), st.nothing()),
    "/schedules": (
        {"task", "cron", "interval", "timezone", "payload", "schedule_id", "options"},
        st.one_of(
            st.tuples(st.just("task"), JSON.filter(lambda v: not isinstance(v, str))),
            st.tuples(st.just("options"), JSON.filter(lambda v: not isinstance(v, dict) and v)),
            st.tuples(st.just("interval"), BAD_SECONDS.filter(lambda v: v is not None)),
            st.tuples(st.just("cron"), st.text(max_size=20).filter(_refused(_cron))),
            st.tuples(st.just("timezone"), st.text(max_size=20).filter(_refused(_zone))),
        ),
    ),
}


@pytest.fixture
def api(server_factory: Callable[..., RedisServer], make_setup: Callable[..., Setup]) -> Setup:
    server = server_factory()
    setup = make_setup(server.url, authorize=lambda action: True)
    setup.raw = redis.Redis.from_url(server.url)  # type: ignore[attr-defined]
    return setup


def _snapshot(client: redis.Redis) -> dict[bytes, Any]:
    return {key: client.dump(key) for key in sorted(client.scan_iter("api-test:*"))}


@st.composite
def bad_bodies(draw: Any) -> tuple[str, dict[str, Any], str]:
    """(route, body, the field the error must name)."""
    route = draw(st.sampled_from(sorted(ROUTES)))
    known, bad = ROUTES[route]
    body: dict[str, Any] = {}
    unknown = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=10).filter(
        lambda name: name not in known
    )
    if known and draw(st.booleans()):
        field, value = draw(bad)
    else:
        field, value = draw(unknown), draw(JSON)
    if route == "/schedules":  # a valid schedule around the one bad field
        body = {"task": "reindex"}
        body.update({"cron": "0 * * * *"} if field in ("timezone", "cron") else {"interval": 60})
    body[field] = value
    return route, body, field


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(bad_bodies())
def test_a_bad_field_is_a_400_naming_it_and_nothing_is_written(
    api: Setup, case: tuple[str, dict[str, Any], str]
) -> None:
    """400, {"error": "... <field> ..."}, the store unchanged."""
    route, body, field = case
    before = _snapshot(api.raw)  # type: ignore[attr-defined]
    response = api.post(route, json=body)
    assert response.status_code == 400, (route, body, response.get_json())
    assert field in response.get_json()["error"], (route, body, response.get_json())
    assert _snapshot(api.raw) == before  # type: ignore[attr-defined]
