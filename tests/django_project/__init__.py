"""A Django project that tests/integration/test_django.py serves with gunicorn and manage.py."""
