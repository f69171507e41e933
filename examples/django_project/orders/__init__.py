"""An app with jobs: see jobs.py."""
