"""A small Flask app with three cronlock jobs and the management dashboard.

Every gunicorn worker (and every replica of the app) registers the same jobs; Redis
makes each occurrence run on one of them. Redis is ``$REDIS_URL`` (default
``redis://localhost:6379/0``); README.md starts an embedded server and the app::

    REDIS_URL=valkey://127.0.0.1:6390 gunicorn -c gunicorn.conf.py app:app
"""

from __future__ import annotations

import logging
import os
from typing import Any

from flask import Flask, current_app

from cronlock import JobContext
from cronlock.flask import CronLock

cronlock = CronLock()
log = logging.getLogger("example")


@cronlock.interval(seconds=5, key="heartbeat")
def heartbeat(ctx: JobContext) -> None:
    """Every 5 s on one worker: the app context is there (config, extensions, db)."""
    log.info("heartbeat from %s, slot %s", current_app.name, ctx.slot.isoformat())


@cronlock.cron("*/5 * * * *", key="send-digest", ttl=120)
def send_digest(ctx: JobContext) -> None:
    """Every 5 minutes: the idempotency key lets the mailer drop a repeated send."""
    log.info("sending digest %s", ctx.idempotency_key)


@cronlock.cron("30 3 * * *", key="nightly-cleanup", ttl=600, timezone="Europe/Athens")
def nightly_cleanup(ctx: JobContext) -> None:
    """03:30 Athens time: long work checks for cancellation between steps."""
    for table in ("sessions", "carts", "tokens"):
        ctx.check()
        log.info("cleaning %s", table)


def create_app() -> Flask:
    app = Flask(__name__)
    app.config.update(
        CRONLOCK_REDIS_URL=os.environ.get("REDIS_URL", "redis://localhost:6379/0"),
        CRONLOCK_PREFIX="example-shop",
        # Starts the jobs under `flask run` (in the reloader's child only) and in each
        # gunicorn worker; the hooks in gunicorn.conf.py handle --preload and exits.
        CRONLOCK_AUTOSTART=True,
        # Management actions (pause, resume, run now) need this bearer token; unset,
        # the dashboard is read-only.
        CRONLOCK_API_TOKEN=os.environ.get("CRONLOCK_API_TOKEN"),
    )
    cronlock.init_app(app)
    app.register_blueprint(cronlock.blueprint(title="example shop"))

    @app.get("/")
    def index() -> dict[str, Any]:
        return {"hello": "world", "dashboard": "/cronlock/", "health": "/cronlock/health"}

    return app


logging.basicConfig(level=logging.INFO, format="%(asctime)s %(process)d %(name)s %(message)s")
app = create_app()
