"""The example project: settings, URLs, WSGI."""
