"""The dashboard and management API as Django views, behind Django's own login.

Mount them with ``path("cronlock/", include("cronlock.django.urls"))``. The routes and
the JSON they answer are the Flask blueprint's (see docs/flask.md, "Endpoints"); they
work on the project's runner ([`cronlock.django.runner`][cronlock.django.runner]) through
its [`Admin`][cronlock.admin.Admin].

Who may use them: an active user with ``is_staff``, or, when
``settings.CRONLOCK["PERMISSION"]`` names one (``"app_label.codename"``), a user with
that permission (``user.has_perm``; superusers have every permission). The rule is the
same for reading and for actions. A visitor who is not logged in is sent to
``settings.LOGIN_URL`` from the page and gets 403 from the API; a logged-in user
without the right gets 403 from both.

Actions (POST, DELETE) also need Django's CSRF token (``X-CSRFToken``, which the page
sends), whether or not ``CsrfViewMiddleware`` is installed, and a JSON body
(``Content-Type: application/json``, else 415). Nothing changes on GET. Invalid input
answers 400 with the message the Python API raises; an unknown job 404; Redis
unreachable 503.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Optional

import redis
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.urls import reverse
from django.views.decorators.csrf import csrf_protect

from cronlock import _dashboard
from cronlock._api import (
    Conflict,
    pause_reply,
    resume_request,
    schedule_dict,
    schedule_reply,
    trigger_reply,
)
from cronlock.django import ProjectRunner, runner
from cronlock.django._settings import parse_settings
from cronlock.errors import ConfigurationError

logger = logging.getLogger("cronlock.django")

ACTIONS = ("read", "pause", "resume", "trigger", "add_schedule", "remove_schedule")
MAX_HISTORY = 500
View = Callable[..., HttpResponse]


def _project() -> ProjectRunner:
    return runner


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


def _dumps(value: Any) -> Any:
    return value.as_dict() if hasattr(value, "as_dict") else value


def _permission() -> Optional[str]:
    return parse_settings(getattr(settings, "CRONLOCK", None)).permission


def allowed(request: HttpRequest, action: str) -> bool:
    """Whether ``request.user`` may do ``action`` (one of `ACTIONS`): staff, or the permission."""
    user = getattr(request, "user", None)
    if user is None:
        raise ConfigurationError(
            "cronlock.django views need django.contrib.auth's AuthenticationMiddleware "
            "(request.user is missing)"
        )
    if not (user.is_authenticated and user.is_active):
        return False
    permission = _permission()
    return bool(user.has_perm(permission)) if permission else bool(user.is_staff)


def _refuse(request: HttpRequest, action: str) -> JsonResponse:
    who = f"the permission {_permission()!r}" if _permission() else "a staff user"
    if not request.user.is_authenticated:
        return _error(403, f"{action}: log in as {who}")
    return _error(403, f"{action}: not authorized (needs {who})")


def _api(action: str, methods: tuple[str, ...]) -> Callable[[View], View]:
    """The checks every API view makes: method (405), authorization (403), Redis (503)."""

    def decorate(view: View) -> View:
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = _error(405, f"method {request.method} not allowed here")
                response["Allow"] = ", ".join(methods)
                return response
            if not allowed(request, action):
                return _refuse(request, action)
            try:
                return view(request, *args, **kwargs)
            except redis.RedisError as exc:
                logger.warning("cronlock: management API could not reach Redis: %s", exc)
                return _error(503, f"Redis is unavailable: {exc}")
            except Exception as exc:
                if not isinstance(exc, _project().admin.store.errors):
                    raise
                logger.warning("cronlock: management API could not reach its store: %s", exc)
                return _error(503, f"the store is unavailable: {type(exc).__name__}: {exc}")

        checked.__name__ = view.__name__
        checked.__doc__ = view.__doc__
        return checked

    return decorate


class _BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _body(request: HttpRequest) -> dict[str, Any]:
    if request.method == "DELETE" and not request.body:
        return {}  # nothing to parse; the action is in the URL
    if request.content_type != "application/json":
        raise _BodyError(415, "send a JSON body with Content-Type: application/json")
    if not request.body:
        return {}
    try:
        data = json.loads(request.body)
    except ValueError:
        raise _BodyError(400, "the body is not valid JSON") from None
    if not isinstance(data, dict):
        raise _BodyError(400, "the JSON body must be an object")
    return data


def _mutate(
    request: HttpRequest, action: str, fn: Callable[[dict[str, Any]], tuple[Any, int]]
) -> HttpResponse:
    try:
        result, status = fn(_body(request))
    except _BodyError as exc:
        return _error(exc.status, str(exc))
    except KeyError as exc:
        return _error(404, str(exc.args[0]) if exc.args else "not found")
    except Conflict as exc:
        return _error(409, str(exc))
    except (ValueError, TypeError) as exc:  # ConfigurationError is a ValueError
        return _error(400, str(exc))
    logger.info("cronlock: management API %s by %s", action, request.user)
    return JsonResponse(result, status=status)


def _health() -> tuple[bool, dict[str, Any]]:
    report = _project().health()
    return bool(report.ok), report.as_dict()


# -- the page --------------------------------------------------------------------------


def dashboard(request: HttpRequest) -> HttpResponse:
    """``GET /``: the dashboard page (login page for visitors, 403 without the right)."""
    if request.method != "GET":
        return HttpResponse(status=405, headers={"Allow": "GET"})
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not allowed(request, "read"):
        return HttpResponse("403 Forbidden: not authorized", status=403, content_type="text/plain")
    try:
        context = _dashboard.dashboard_context(_project().admin, _health)
    except redis.RedisError as exc:
        return HttpResponse(f"Redis is unavailable: {exc}", status=503, content_type="text/plain")
    except Exception as exc:
        if not isinstance(exc, _project().admin.store.errors):
            raise
        return HttpResponse(
            f"the store is unavailable: {exc}", status=503, content_type="text/plain"
        )
    base = reverse("cronlock:dashboard").rstrip("/")
    page = _dashboard.render(
        {
            **context,
            "title": parse_settings(getattr(settings, "CRONLOCK", None)).title,
            "authorized": allowed(request, "pause"),
            "token_auth": False,
            "api": base + "/api",
            "static": base + "/static",
            "csrf_header": "X-CSRFToken",
            "csrf_token": get_token(request),
        }
    )
    return HttpResponse(page, content_type="text/html; charset=utf-8")


def static(request: HttpRequest, name: str) -> HttpResponse:
    """``GET /static/<name>``: the page's stylesheet and script (no ``collectstatic`` needed)."""
    found = _dashboard.static_file(name)
    if found is None:
        return HttpResponse(status=404)
    data, content_type = found
    response = HttpResponse(data, content_type=content_type)
    response["Cache-Control"] = "max-age=300"
    return response


# -- reads ------------------------------------------------------------------------------


def health(request: HttpRequest) -> HttpResponse:
    """``GET /health``: the runner's health, 200 when ok, else 503 (same right as reading)."""
    if request.method != "GET":
        return _error(405, f"method {request.method} not allowed here")
    if not allowed(request, "read"):
        return _refuse(request, "read")
    try:
        ok, report = _health()
    except redis.RedisError as exc:
        ok, report = False, {"ok": False, "redis": False, "store": False, "problems": [str(exc)]}
    return JsonResponse(report, status=200 if ok else 503)


def auth(request: HttpRequest) -> HttpResponse:
    """``GET /api/auth``: ``{"authorized": bool}`` for this request's user."""
    return JsonResponse({"authorized": allowed(request, "pause")})


@_api("read", ("GET",))
def jobs(request: HttpRequest) -> HttpResponse:
    """``GET /api/jobs``: every job's status."""
    return JsonResponse({"jobs": [_dumps(j) for j in _project().admin.jobs()]})


@_api("read", ("GET",))
def job(request: HttpRequest, key: str) -> HttpResponse:
    """``GET /api/jobs/<key>?limit=50``: one job and its latest history, newest first."""
    raw = request.GET.get("limit", "50")
    try:
        limit = int(raw)
    except ValueError:
        return _error(400, f"limit must be an int; got {raw!r}")
    if not 1 <= limit <= MAX_HISTORY:
        return _error(400, f"limit must be between 1 and {MAX_HISTORY}; got {limit}")
    admin = _project().admin
    try:
        status = admin.job(key)
        history = admin.history(key, limit)
    except KeyError as exc:
        return _error(404, str(exc.args[0]) if exc.args else f"no job {key!r}")
    except (ValueError, TypeError) as exc:
        return _error(400, str(exc))
    return JsonResponse({"job": _dumps(status), "history": [_dumps(h) for h in history]})


@_api("read", ("GET",))
def runners(request: HttpRequest) -> HttpResponse:
    """``GET /api/runners``: the live runners (heartbeats)."""
    return JsonResponse({"runners": [_dumps(r) for r in _project().admin.runners()]})


def schedules(request: HttpRequest) -> HttpResponse:
    """``GET /api/schedules`` lists the dynamic schedules; ``POST`` adds one (201)."""
    if request.method == "POST":
        return _add_schedule(request)
    return _list_schedules(request)


@_api("read", ("GET",))
def _list_schedules(request: HttpRequest) -> HttpResponse:
    specs = _project().admin.list_schedules()
    return JsonResponse({"schedules": [schedule_dict(s) for s in specs]})


# -- actions ----------------------------------------------------------------------------


@csrf_protect
@_api("pause", ("POST",))
def pause(request: HttpRequest, key: str) -> HttpResponse:
    """``POST /api/jobs/<key>/pause`` ``{"force": false}``: every replica skips the job
    from its next claim; 409 when no runner has registered it (unless force)."""

    def run(data: dict[str, Any]) -> tuple[Any, int]:
        return pause_reply(_project().admin, key, data)

    return _mutate(request, "pause", run)


@csrf_protect
@_api("resume", ("POST",))
def resume(request: HttpRequest, key: str) -> HttpResponse:
    """``POST /api/jobs/<key>/resume``."""

    def run(data: dict[str, Any]) -> tuple[Any, int]:
        resume_request(data)
        _project().admin.resume(key)
        return {"key": key, "paused": False}, 200

    return _mutate(request, "resume", run)


@csrf_protect
@_api("trigger", ("POST",))
def trigger(request: HttpRequest, key: str) -> HttpResponse:
    """``POST /api/jobs/<key>/trigger`` ``{"force": false, "expires": 600}``: 202, one
    replica runs it now; 409 when the job is paused (unless force)."""

    def run(data: dict[str, Any]) -> tuple[Any, int]:
        return trigger_reply(_project().admin, key, data)

    return _mutate(request, "trigger", run)


@csrf_protect
@_api("add_schedule", ("POST",))
def _add_schedule(request: HttpRequest) -> HttpResponse:
    def run(data: dict[str, Any]) -> tuple[Any, int]:
        return schedule_reply(_project().admin, data)

    return _mutate(request, "add_schedule", run)


@csrf_protect
@_api("remove_schedule", ("DELETE",))
def remove_schedule(request: HttpRequest, schedule_id: str) -> HttpResponse:
    """``DELETE /api/schedules/<id>``: 200, 404 if there was none."""

    def run(data: dict[str, Any]) -> tuple[Any, int]:
        if not _project().admin.remove_schedule(schedule_id):
            raise KeyError(f"no schedule {schedule_id!r}")
        return {"removed": schedule_id}, 200

    return _mutate(request, "remove_schedule", run)
