"""A Flask app served by real gunicorn processes in tests/integration/test_gunicorn.py."""
