"""``runner.health()``: is this runner able to do its work right now?

The public path of `cronlock.ops.health`, where it is defined.
"""

from __future__ import annotations

from cronlock.ops.health import STALL_AFTER_S, Health, Probed, Vitals, check_health

__all__ = ["STALL_AFTER_S", "Health", "Probed", "Vitals", "check_health"]
