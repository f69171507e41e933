"""The ``cronlock`` command line, one module per command (see :mod:`cronlock.cli`)."""
