#!/usr/bin/env python
"""The test project's manage.py (run with this directory as the working directory)."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dtproject.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
