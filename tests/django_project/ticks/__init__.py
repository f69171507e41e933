"""The test project's app: its jobs append every start and end to a per-pid record file."""
