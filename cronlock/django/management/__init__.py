"""Management commands of [`cronlock.django`][cronlock.django]: ``manage.py cronlock``."""
