"""The test project's settings, URLs and WSGI entry point."""
