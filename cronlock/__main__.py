"""``python -m cronlock``: the same as the ``cronlock`` command."""

from __future__ import annotations

import sys

from cronlock.cli import main

if __name__ == "__main__":
    sys.exit(main())
