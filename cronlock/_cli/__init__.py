"""The ``cronlock`` command line, one module per command (see `cronlock.cli`)."""
