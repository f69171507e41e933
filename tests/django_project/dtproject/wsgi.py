"""The WSGI application gunicorn serves: ``dtproject.wsgi:application``."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dtproject.settings")
application = get_wsgi_application()
