"""Wake-up events on Redis pub/sub: the prefix's ``P:events`` channel, JSON messages."""

from __future__ import annotations

import contextlib
import json
from typing import Any, Optional

from cronlock._scripts import text

__all__ = ["PubSub", "finished_event"]


def finished_event(key: str, slot_ms: int) -> str:
    """The message a watched slot's finish publishes (``job_finish``): its watchers drop
    their re-check of it."""
    return json.dumps({"type": "finished", "key": key, "slot": slot_ms})


class PubSub:
    """Wake-up events from the prefix's channel, decoded; non-JSON messages are skipped."""

    def __init__(self, client: Any, channel: str) -> None:
        self._pubsub = client.pubsub(ignore_subscribe_messages=True)
        try:
            self._pubsub.subscribe(channel)
        except BaseException:
            self.close()
            raise

    def get(self, timeout: float) -> Optional[dict[str, Any]]:
        message = self._pubsub.get_message(timeout=timeout)
        if message is None or message.get("type") != "message":
            return None
        try:
            event = json.loads(text(message.get("data")))
        except ValueError:
            return None
        return event if isinstance(event, dict) else None

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a broken connection may fail
            self._pubsub.close()
