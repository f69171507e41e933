"""A data migration that records whether the runner runs while ``migrate`` does."""

from __future__ import annotations

from typing import Any, ClassVar

from django.db import migrations


def record(apps: Any, schema_editor: Any) -> None:
    from ticks.record import log

    from cronlock.django import runner

    log(event="migrate", running=runner.running, autostart=list(runner.autostart or ()))


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = []
    operations: ClassVar[list[Any]] = [migrations.RunPython(record, migrations.RunPython.noop)]
