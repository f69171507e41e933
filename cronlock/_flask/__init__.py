"""Private parts of :mod:`cronlock.flask`: the management blueprint and dashboard."""
