"""The management blueprint: a JSON API and a dashboard over [`Admin`][cronlock.admin.Admin].

Routes (under ``url_prefix``, default ``/cronlock``):

```text
GET    /                            the dashboard (HTML)
GET    /health                      runner health: 200 when ok, else 503
GET    /api/jobs                    every job: status, next run, last outcome
GET    /api/jobs/<key>?limit=50     one job and its latest history entries
GET    /api/runners                 live runners (heartbeats)
GET    /api/schedules               dynamic schedules
GET    /api/auth                    {"authorized": bool} for this request's credentials
GET    /api/openapi.json            this API described in OpenAPI 3.0
POST   /api/jobs/<key>/pause        {"force": false} -> 200; 409 if no runner has <key>
POST   /api/jobs/<key>/resume       {} -> 200
POST   /api/jobs/<key>/trigger      {"force": false, "expires": 600} -> 202 {"request_id",
                                    "runners", "warning" (no live runner)}; 409 if paused
POST   /api/schedules               {"task", "cron" | "interval", ...} -> 201 {"schedule",
                                    "warning" (no live runner has the task)}
DELETE /api/schedules/<id>          -> 200, 404 if there was none
```

Safety: every mutation needs authorization, and is refused (403) when none is set up:
the ``authorize(action)`` callable returns True, or the request carries
``Authorization: Bearer <CRONLOCK_API_TOKEN>``. Nothing changes on GET. POST bodies
must be JSON (``Content-Type: application/json``, else 415), which a cross-site HTML
form cannot send without a CORS preflight. Invalid input is a 400 with the message the
Python API raises. Reads are open unless ``authorize("read")`` says otherwise.
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Any, Callable, Optional

import redis
from flask import Blueprint, Response, current_app, jsonify, render_template, request
from werkzeug.exceptions import HTTPException

from cronlock._api import (
    Conflict,
    pause_reply,
    resume_request,
    schedule_dict,
    schedule_reply,
    trigger_reply,
)
from cronlock._dashboard import dashboard_context
from cronlock._openapi import openapi
from cronlock.clock import monotonic
from cronlock.errors import ConfigurationError

logger = logging.getLogger("cronlock.flask")

PACKAGE = Path(__file__).resolve().parent.parent
ACTIONS = ("read", "pause", "resume", "trigger", "add_schedule", "remove_schedule")
MAX_HISTORY = 500

Authorize = Callable[[str], bool]


class _Source:
    """Where the blueprint gets an Admin and a health report from.

    Accepts the Flask extension (the current app's runner), a ``CronRunner``, an
    ``Admin``, or a callable returning one of those (looked up per request).
    """

    def __init__(self, source: Any) -> None:
        self.source = source

    def _resolve(self) -> Any:
        source = self.source
        if hasattr(source, "runner_for"):  # the CronLock extension
            return source.runner_for(current_app._get_current_object())  # type: ignore[attr-defined]
        if callable(source) and not hasattr(source, "jobs"):
            return source()
        return source

    def admin(self) -> Any:
        target = self._resolve()
        admin = getattr(target, "admin", None)
        if admin is not None and not callable(admin):
            return admin  # a runner's ``admin`` property
        return target

    def health(self) -> tuple[bool, dict[str, Any]]:
        target = self._resolve()
        check = getattr(target, "health", None)
        if callable(check):
            report = check()
            return bool(report.ok), report.as_dict()
        return store_health(target.store)  # an Admin alone: does its store answer?

    def store_errors(self) -> tuple[type[BaseException], ...]:
        """What the store behind this request's Admin raises when it is unavailable."""
        errors: tuple[type[BaseException], ...] = self.admin().store.errors
        return errors


def store_health(store: Any) -> tuple[bool, dict[str, Any]]:
    """``(ok, report)`` for a store alone: one ping, timed; the report has the fields of
    ``Health`` that say so (``store``/``store_latency_ms`` and their older names)."""
    started = monotonic()
    try:
        store.ping()
    except store.errors as exc:
        report: dict[str, Any] = {"store": False, "store_latency_ms": None}
        report["problems"] = [f"store: {exc}"]
        return False, {"ok": False, "redis": False, "redis_latency_ms": None, **report}
    latency = round((monotonic() - started) * 1000, 3)
    report = {"store": True, "store_latency_ms": latency, "problems": []}
    return True, {"ok": True, "redis": True, "redis_latency_ms": latency, **report}


def _json_error(status: int, message: str, **extra: Any) -> tuple[Response, int]:
    return jsonify({"error": message, **extra}), status


def _dumps(value: Any) -> Any:
    return value.as_dict() if hasattr(value, "as_dict") else value


def make_blueprint(
    source: Any,
    *,
    authorize: Optional[Authorize] = None,
    url_prefix: str = "/cronlock",
    name: str = "cronlock",
    title: str = "cronlock",
) -> Blueprint:
    """Build the blueprint (see the module docstring for the routes and their rules).

    Args:
        source: the [`CronLock`][cronlock.flask.CronLock] extension, a ``CronRunner``, an
            ``Admin``, or a callable returning one (called per request).
        authorize: ``authorize(action) -> bool``, called inside the request for each
            endpoint with ``action`` in `ACTIONS`. None: reads are open, and
            mutations need the bearer token ``CRONLOCK_API_TOKEN`` (refused if unset).
        url_prefix: where to mount it.
        name: the blueprint name (change it to mount two).
        title: shown in the dashboard's header.
    """
    if authorize is not None and not callable(authorize):
        raise ConfigurationError(f"authorize must be callable; got {authorize!r}")
    bp = Blueprint(
        name,
        __name__,
        url_prefix=url_prefix,
        template_folder=str(PACKAGE / "templates"),
        static_folder=str(PACKAGE / "static"),
        static_url_path="/static",
    )
    views = _Views(_Source(source), authorize, bp, title)
    bp.before_request(views.check_read)
    bp.register_error_handler(_BodyError, views.body_error)
    bp.register_error_handler(redis.RedisError, views.redis_error)
    bp.register_error_handler(Exception, views.store_error)  # another store's errors
    bp.register_error_handler(HTTPException, views.http_error)
    # Routing errors (a method the route does not take, a path no route has) never reach
    # the blueprint's handlers: Flask sends them to the app's. Answer those under the
    # API as JSON too; every other path keeps the app's own page.
    for code in (404, 405):
        bp.app_errorhandler(code)(views.http_error)
    rules: list[tuple[str, str, Callable[..., Any]]] = [
        ("/", "GET", views.dashboard),
        ("/health", "GET", views.health),
        ("/api/auth", "GET", views.auth),
        ("/api/openapi.json", "GET", views.openapi),
        ("/api/jobs", "GET", views.jobs),
        ("/api/jobs/<path:key>", "GET", views.job),
        ("/api/runners", "GET", views.runners),
        ("/api/schedules", "GET", views.schedules),
        ("/api/jobs/<path:key>/pause", "POST", views.pause),
        ("/api/jobs/<path:key>/resume", "POST", views.resume),
        ("/api/jobs/<path:key>/trigger", "POST", views.trigger),
        ("/api/schedules", "POST", views.add_schedule),
        ("/api/schedules/<path:schedule_id>", "DELETE", views.remove_schedule),
    ]
    for rule, method, view in rules:
        endpoint = f"{view.__name__}_{method.lower()}"
        bp.add_url_rule(rule, endpoint, view, methods=[method])
    return bp


class _Views:
    """The blueprint's views, sharing the source, the authorization rule and the blueprint."""

    def __init__(
        self, src: _Source, authorize: Optional[Authorize], bp: Blueprint, title: str
    ) -> None:
        self.src = src
        self.authorize = authorize
        self.bp = bp
        self.title = title

    # -- authorization and bodies ---------------------------------------------------------

    def token_ok(self) -> bool:
        token = current_app.config.get("CRONLOCK_API_TOKEN")
        header = request.headers.get("Authorization", "")
        if not token or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[len("Bearer ") :].encode(), str(token).encode())

    def allowed(self, action: str) -> bool:
        if self.token_ok():
            return True
        if self.authorize is not None:
            return bool(self.authorize(action))
        return action == "read"

    def refuse(self, action: str) -> tuple[Response, int]:
        if self.authorize is None and not current_app.config.get("CRONLOCK_API_TOKEN"):
            return _json_error(
                403,
                f"{action} refused: management actions are off until the app passes "
                "authorize=... or sets CRONLOCK_API_TOKEN",
            )
        status = 401 if self.authorize is None else 403
        response, status = _json_error(status, f"{action}: not authorized")
        if self.authorize is None:
            response.headers["WWW-Authenticate"] = 'Bearer realm="cronlock"'
        return response, status

    def check_read(self) -> Optional[tuple[Response, int]]:
        is_static = request.endpoint == f"{self.bp.name}.static"
        if request.method == "GET" and not is_static and not self.allowed("read"):
            return self.refuse("read")
        return None

    @staticmethod
    def body() -> dict[str, Any]:
        if request.method == "DELETE" and not request.get_data():
            return {}  # nothing to parse; the action is in the URL
        if not request.is_json:
            raise _BodyError(415, "send a JSON body with Content-Type: application/json")
        data = request.get_json(silent=True)
        if data is None and request.get_data():
            raise _BodyError(400, "the body is not valid JSON")
        if data is None:
            return {}
        if not isinstance(data, dict):
            raise _BodyError(400, "the JSON body must be an object")
        return data

    def mutate(self, action: str, fn: Callable[[dict[str, Any]], tuple[Any, int]]) -> Any:
        if not self.allowed(action):
            return self.refuse(action)
        data = self.body()
        try:
            result, status = fn(data)
        except KeyError as exc:
            return _json_error(404, str(exc.args[0]) if exc.args else "not found")
        except Conflict as exc:
            return _json_error(409, str(exc))
        except (ValueError, TypeError) as exc:  # ConfigurationError is a ValueError
            return _json_error(400, str(exc))
        logger.info("cronlock: management API %s by %s", action, request.remote_addr)
        return jsonify(result), status

    # -- errors -------------------------------------------------------------------------

    @staticmethod
    def body_error(error: _BodyError) -> tuple[Response, int]:
        return _json_error(error.status, error.message)

    @staticmethod
    def redis_error(error: redis.RedisError) -> tuple[Response, int]:
        logger.warning("cronlock: management API could not reach Redis: %s", error)
        return _json_error(503, f"Redis is unavailable: {error}")

    def store_error(self, error: Exception) -> tuple[Response, int]:
        """503 for the errors of the request's store (not Redis: that is `redis_error`);
        any other error propagates, as if this handler were not there."""
        if not isinstance(error, self.src.store_errors()):
            raise error
        logger.warning("cronlock: management API could not reach its store: %s", error)
        return _json_error(503, f"the store is unavailable: {type(error).__name__}: {error}")

    def http_error(self, error: HTTPException) -> Any:
        # Inside the API, answer errors (405, 404) as JSON like everything else.
        if request.path.startswith(request.script_root + (self.bp.url_prefix or "") + "/api"):
            response, status = _json_error(error.code or 500, error.description or str(error))
            for name, value in error.get_headers():
                if name.lower() != "content-type":  # e.g. Allow, on a 405
                    response.headers[name] = value
            return response, status
        return error

    # -- reads --------------------------------------------------------------------------

    def health(self) -> tuple[Response, int]:
        try:
            ok, report = self.src.health()
        except redis.RedisError as exc:
            ok, report = (
                False,
                {"ok": False, "redis": False, "store": False, "problems": [str(exc)]},
            )
        return jsonify(report), 200 if ok else 503

    def openapi(self) -> Response:
        return jsonify(openapi(request.script_root + (self.bp.url_prefix or "")))

    def auth(self) -> Response:
        return jsonify({"authorized": self.allowed("pause")})

    def jobs(self) -> Response:
        return jsonify({"jobs": [_dumps(j) for j in self.src.admin().jobs()]})

    def job(self, key: str) -> tuple[Response, int]:
        try:
            limit = int(request.args.get("limit", "50"))
        except ValueError:
            return _json_error(400, f"limit must be an int; got {request.args['limit']!r}")
        if not 1 <= limit <= MAX_HISTORY:
            return _json_error(400, f"limit must be between 1 and {MAX_HISTORY}; got {limit}")
        admin = self.src.admin()
        try:
            status = admin.job(key)
            history = admin.history(key, limit)
        except KeyError as exc:
            return _json_error(404, str(exc.args[0]) if exc.args else f"no job {key!r}")
        except (ValueError, TypeError) as exc:
            return _json_error(400, str(exc))
        return jsonify({"job": _dumps(status), "history": [_dumps(h) for h in history]}), 200

    def runners(self) -> Response:
        return jsonify({"runners": [_dumps(r) for r in self.src.admin().runners()]})

    def schedules(self) -> Response:
        specs = self.src.admin().list_schedules()
        return jsonify({"schedules": [schedule_dict(s) for s in specs]})

    # -- mutations ------------------------------------------------------------------------

    def pause(self, key: str) -> Any:
        def run(data: dict[str, Any]) -> tuple[Any, int]:
            return pause_reply(self.src.admin(), key, data)

        return self.mutate("pause", run)

    def resume(self, key: str) -> Any:
        def run(data: dict[str, Any]) -> tuple[Any, int]:
            resume_request(data)
            self.src.admin().resume(key)
            return {"key": key, "paused": False}, 200

        return self.mutate("resume", run)

    def trigger(self, key: str) -> Any:
        def run(data: dict[str, Any]) -> tuple[Any, int]:
            return trigger_reply(self.src.admin(), key, data)

        return self.mutate("trigger", run)

    def add_schedule(self) -> Any:
        def run(data: dict[str, Any]) -> tuple[Any, int]:
            return schedule_reply(self.src.admin(), data)

        return self.mutate("add_schedule", run)

    def remove_schedule(self, schedule_id: str) -> Any:
        def run(data: dict[str, Any]) -> tuple[Any, int]:
            if not self.src.admin().remove_schedule(schedule_id):
                raise KeyError(f"no schedule {schedule_id!r}")
            return {"removed": schedule_id}, 200

        return self.mutate("remove_schedule", run)

    # -- the dashboard ------------------------------------------------------------------

    def dashboard(self) -> str:
        context = dashboard_context(self.src.admin(), self.src.health)
        return render_template(
            "cronlock/dashboard.html",
            **context,
            title=self.title,
            authorized=self.allowed("pause"),
            token_auth=bool(current_app.config.get("CRONLOCK_API_TOKEN")),
            api=request.script_root + (self.bp.url_prefix or "") + "/api",
            static=request.script_root + (self.bp.url_prefix or "") + "/static",
        )


class _BodyError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
