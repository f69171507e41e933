"""``manage.py cronlock``: the cronlock CLI with the project's settings."""
