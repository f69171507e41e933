"""URLs of the dashboard and management API: ``path("cronlock/", include("cronlock.django.urls"))``.

```text
GET    ./                           the dashboard (HTML)
GET    ./static/<name>              its stylesheet and script
GET    ./health                     runner health: 200 when ok, else 503
GET    ./api/auth                   {"authorized": bool} for this user
GET    ./api/jobs                   every job: status, next run, last outcome
GET    ./api/jobs/<key>?limit=50    one job and its latest history entries
GET    ./api/runners                live runners (heartbeats)
GET    ./api/schedules              dynamic schedules
POST   ./api/jobs/<key>/pause       {} -> 200
POST   ./api/jobs/<key>/resume      {} -> 200
POST   ./api/jobs/<key>/trigger     {"force": false} -> 202 {"request_id": ...}
POST   ./api/schedules              {"task", "cron" | "interval", ...} -> 201
DELETE ./api/schedules/<id>         -> 200, 404 if there was none
```

The URL names are in the ``cronlock`` namespace (``reverse("cronlock:dashboard")``).
Who may use them, and the CSRF rule: see [`cronlock.django.views`][cronlock.django.views].
"""

from __future__ import annotations

from django.urls import path

from cronlock.django import views

app_name = "cronlock"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("static/<str:name>", views.static, name="static"),
    path("health", views.health, name="health"),
    path("api/auth", views.auth, name="auth"),
    path("api/jobs", views.jobs, name="jobs"),
    # The actions first: a key may hold slashes, and "<key>" alone would match them too.
    path("api/jobs/<path:key>/pause", views.pause, name="pause"),
    path("api/jobs/<path:key>/resume", views.resume, name="resume"),
    path("api/jobs/<path:key>/trigger", views.trigger, name="trigger"),
    path("api/jobs/<path:key>", views.job, name="job"),
    path("api/runners", views.runners, name="runners"),
    path("api/schedules", views.schedules, name="schedules"),
    path("api/schedules/<path:schedule_id>", views.remove_schedule, name="remove_schedule"),
]
