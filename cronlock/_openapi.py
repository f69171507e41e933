"""The management API described in OpenAPI 3.0: what ``GET /api/openapi.json`` serves.

The response schemas are read off the result dataclasses (`JobStatus`, `HistoryEntry`,
`RunnerInfo`, `Health`), so a field added there is described here too; the request
bodies are the ones `cronlock._api` reads. `tests/integration/test_api_fuzz.py` sends
generated requests built from this document to the live Flask app and checks every
answer against it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from cronlock._registry import RunnerInfo
from cronlock._version import __version__
from cronlock.ops.health import Health
from cronlock.ops.history import HistoryEntry
from cronlock.ops.jobs import JobStatus

__all__ = ["openapi"]

MAX_HISTORY = 500

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string", "description": "what was wrong, naming it"}},
}


def _type(annotation: str) -> dict[str, Any]:
    """A JSON schema for a field annotated ``annotation`` (a string: postponed)."""
    nullable = "Optional" in annotation or "None" in annotation
    if "datetime" in annotation:
        out: dict[str, Any] = {"type": "string", "format": "date-time"}
    elif "tuple" in annotation or "list" in annotation:
        out = {"type": "array"}
    elif "Mapping" in annotation or "dict" in annotation:
        out = {"type": "object"}
    elif "bool" in annotation:
        out = {"type": "boolean"}
    elif "float" in annotation:
        out = {"type": "number"}
    elif "int" in annotation:
        out = {"type": "integer"}
    elif "str" in annotation or "RunOutcome" in annotation:
        out = {"type": "string"}
    else:
        out = {}
    if nullable and out:
        out["nullable"] = True
    return out


def _object(cls: Any, *, exclude: frozenset[str] = frozenset()) -> dict[str, Any]:
    fields = [f for f in dataclasses.fields(cls) if f.name not in exclude]
    return {
        "type": "object",
        "required": [f.name for f in fields],
        "properties": {f.name: _type(str(f.type)) for f in fields},
        "description": (cls.__doc__ or "").strip().splitlines()[0],
    }


def _body(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "required": False,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": properties,
                    "required": list(required),
                    "additionalProperties": False,
                }
            }
        },
    }


def _responses(ok: int, ok_schema: dict[str, Any], *errors: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        str(ok): {"description": "done", "content": {"application/json": {"schema": ok_schema}}}
    }
    for code in errors:
        out[str(code)] = {
            "description": _WHY[code],
            "content": {"application/json": {"schema": _ERROR}},
        }
    return out


_WHY = {
    400: "bad input; the message names the field or value",
    401: "no (valid) bearer token",
    403: "not authorized, or management actions are off",
    404: "no such job or schedule",
    409: "refused as it stands (paused job, unknown key); force may help",
    415: "the body is not JSON",
    503: "the store is unavailable",
}
_MUTATION_ERRORS = (400, 401, 403, 415, 503)

_KEY = {"name": "key", "in": "path", "required": True, "schema": {"type": "string"}}
_FORCE = {"type": "boolean", "description": "ignore pause (and overlap, for a trigger)"}


def openapi(server_url: str) -> dict[str, Any]:
    """The OpenAPI 3.0 document of the blueprint mounted at ``server_url``."""
    job = _object(JobStatus)
    entry = _object(HistoryEntry, exclude=frozenset({"fields"}))
    runner = _object(RunnerInfo)
    health = _object(Health)
    health["required"] = []  # a report made without a runner has only some of them
    schedule = {"type": "object", "required": ["id", "task"]}
    trigger = {
        "type": "object",
        "required": ["key", "request_id", "force", "expires_in", "runners"],
        "properties": {
            "key": {"type": "string"},
            "request_id": {"type": "string"},
            "force": {"type": "boolean"},
            "expires_in": {"type": "number"},
            "runners": {"type": "integer", "nullable": True},
            "warning": {"type": "string", "description": "no live runner has the job"},
        },
    }
    schedule_properties: dict[str, Any] = {
        "task": {"type": "string"},
        "cron": {"type": "string", "nullable": True},
        "interval": {"type": "number", "nullable": True},
        "timezone": {"type": "string"},
        "payload": {},
        "schedule_id": {"type": "string", "nullable": True},
        "options": {"type": "object"},
    }
    paused = {"type": "object", "required": ["key", "paused"]}
    return {
        "openapi": "3.0.3",
        "info": {"title": "cronlock management API", "version": __version__},
        "servers": [{"url": server_url}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"JobStatus": job, "HistoryEntry": entry, "RunnerInfo": runner},
        },
        "paths": {
            "/health": {
                "get": {
                    "summary": "runner health: 200 when ok, else 503",
                    "responses": {
                        "200": {"description": "healthy", "content": _json(health)},
                        "503": {"description": "unhealthy", "content": _json(health)},
                    },
                }
            },
            "/api/openapi.json": {
                "get": {
                    "summary": "this document",
                    "responses": {"200": {"description": "OpenAPI 3.0", "content": _json({})}},
                }
            },
            "/api/auth": {
                "get": {
                    "summary": "whether this request's credentials may mutate",
                    "responses": _responses(
                        200,
                        {"type": "object", "properties": {"authorized": {"type": "boolean"}}},
                    ),
                }
            },
            "/api/jobs": {
                "get": {
                    "summary": "every job: status, next run, last outcome, runners",
                    "responses": _responses(
                        200, _list("jobs", {"$ref": "#/components/schemas/JobStatus"}), 503
                    ),
                }
            },
            "/api/jobs/{key}": {
                "get": {
                    "summary": "one job and its latest history entries",
                    "parameters": [
                        _KEY,
                        {
                            "name": "limit",
                            "in": "query",
                            "required": False,
                            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY},
                        },
                    ],
                    "responses": _responses(
                        200,
                        {
                            "type": "object",
                            "required": ["job", "history"],
                            "properties": {
                                "job": {"$ref": "#/components/schemas/JobStatus"},
                                "history": {
                                    "type": "array",
                                    "items": {"$ref": "#/components/schemas/HistoryEntry"},
                                },
                            },
                        },
                        400,
                        404,
                        503,
                    ),
                }
            },
            "/api/runners": {
                "get": {
                    "summary": "live runners (heartbeats)",
                    "responses": _responses(
                        200, _list("runners", {"$ref": "#/components/schemas/RunnerInfo"}), 503
                    ),
                }
            },
            "/api/schedules": {
                "get": {
                    "summary": "dynamic schedules",
                    "responses": _responses(200, _list("schedules", schedule), 503),
                },
                "post": {
                    "summary": "store a dynamic schedule (warns when no live runner has the task)",
                    "security": [{"bearer": []}],
                    "requestBody": _body(schedule_properties, ("task",)),
                    "responses": _responses(
                        201,
                        {
                            "type": "object",
                            "required": ["schedule"],
                            "properties": {"schedule": schedule, "warning": {"type": "string"}},
                        },
                        *_MUTATION_ERRORS,
                    ),
                },
            },
            "/api/schedules/{schedule_id}": {
                "delete": {
                    "summary": "remove a dynamic schedule",
                    "security": [{"bearer": []}],
                    "parameters": [{**_KEY, "name": "schedule_id"}],
                    "responses": _responses(
                        200, {"type": "object", "required": ["removed"]}, 404, *_MUTATION_ERRORS
                    ),
                }
            },
            "/api/jobs/{key}/pause": {
                "post": {
                    "summary": "pause on every replica (409 for a key no runner has, unless force)",
                    "security": [{"bearer": []}],
                    "parameters": [_KEY],
                    "requestBody": _body({"force": _FORCE}),
                    "responses": _responses(200, paused, 409, *_MUTATION_ERRORS),
                }
            },
            "/api/jobs/{key}/resume": {
                "post": {
                    "summary": "resume on every replica",
                    "security": [{"bearer": []}],
                    "parameters": [_KEY],
                    "requestBody": _body({}),
                    "responses": _responses(200, paused, *_MUTATION_ERRORS),
                }
            },
            "/api/jobs/{key}/trigger": {
                "post": {
                    "summary": "run once now on one replica (409 when paused, unless force)",
                    "security": [{"bearer": []}],
                    "parameters": [_KEY],
                    "requestBody": _body(
                        {
                            "force": _FORCE,
                            "expires": {
                                "type": "number",
                                "exclusiveMinimum": True,
                                "minimum": 0,
                                "description": "seconds a replica has to take the request",
                            },
                        }
                    ),
                    "responses": _responses(202, trigger, 404, 409, *_MUTATION_ERRORS),
                }
            },
        },
    }


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _list(name: str, items: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "required": [name],
        "properties": {name: {"type": "array", "items": items}},
    }
