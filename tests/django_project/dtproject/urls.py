"""The dashboard under /cronlock/, Django's login views under /accounts/."""

from django.urls import include, path

urlpatterns = [
    path("accounts/", include("django.contrib.auth.urls")),
    path("cronlock/", include("cronlock.django.urls")),
]
