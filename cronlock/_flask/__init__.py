"""Private parts of [`cronlock.flask`][cronlock.flask]: the management blueprint and dashboard."""
