"""The admin (where staff log in) and the cronlock dashboard under /cronlock/."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("cronlock/", include("cronlock.django.urls")),
]
