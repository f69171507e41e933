"""The orders app's jobs; cronlock.django imports this module when Django is ready.

Every process that serves the project registers the same jobs; Redis decides which one
runs each occurrence.
"""

import logging
import os

from django.contrib.auth.models import User

from cronlock.django import runner

logger = logging.getLogger("orders")


@runner.interval(seconds=5, key="heartbeat")
def heartbeat(ctx):
    logger.info("heartbeat slot %s in pid %d", ctx.slot.isoformat(), os.getpid())


@runner.cron("*/5 * * * *", key="count-users", ttl=120)
def count_users(ctx):
    # The ORM works here; cronlock closes old connections before and after each run.
    logger.info("%d users (attempt %d)", User.objects.count(), ctx.attempt)


def nightly_cleanup():
    logger.info("nightly cleanup")


runner.every().day.at("03:30").do(nightly_cleanup)  # 03:30 UTC (the DSL's own timezone)
