"""Differential oracle: Django 3.2 + Django REST framework 3.14.

Django is configured in-process (no project scaffolding) with its defaults, except what a
server needs to answer at all: ALLOWED_HOSTS (DEBUG is off, so an empty list would refuse every
Host with 400), no authentication classes (no sessions, so no CSRF enforcement), and the JSON
renderer only (the browsable API needs templates and static files we do not configure; it only
changes how answers are rendered, never how requests are read).
"""
import json
import os
import re
import sys

import django
from django.conf import settings

settings.configure(
    DEBUG=False,
    SECRET_KEY="differential-oracle",
    ALLOWED_HOSTS=["*"],
    ROOT_URLCONF=__name__,
    # CommonMiddleware is the one that changes routing: APPEND_SLASH (default True) redirects a
    # slash-less URL that does not resolve to the slashed one when that resolves.
    MIDDLEWARE=["django.middleware.common.CommonMiddleware"],
    # DRF's default unauthenticated user is django.contrib.auth's AnonymousUser.
    INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "rest_framework"],
    REST_FRAMEWORK={
        "DEFAULT_AUTHENTICATION_CLASSES": [],
        "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
        # DEFAULT_PARSER_CLASSES stays DRF's default: JSONParser, FormParser, MultiPartParser.
    },
)
django.setup()

from django.core.files.uploadedfile import UploadedFile  # noqa: E402
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpResponse  # noqa: E402
from django.urls import path as url_path  # noqa: E402
from django.utils.datastructures import MultiValueDict  # noqa: E402
from rest_framework.views import APIView  # noqa: E402


def json_text(value):
    """The answer as strict JSON text, whatever the framework parsed. Python's json reads NaN,
    Infinity, 1e400 and lone surrogates that strict JSON cannot write back: +/-infinity is written
    as +/-1e400 digits (a JSON reader gets +/-Infinity back), NaN as the string "NaN" (JSON has no
    NaN), and non-ASCII as \\u escapes (a lone surrogate stays readable)."""

    def strict(v):
        if isinstance(v, float) and v != v:
            return "NaN"
        if isinstance(v, float) and v in (float("inf"), float("-inf")):
            return 10**400 if v > 0 else -(10**400)
        if isinstance(v, dict):
            return {k: strict(x) for k, x in v.items()}
        if isinstance(v, list):
            return [strict(x) for x in v]
        return v

    return json.dumps(strict(value), ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def plain(value):
    """A value as the action reads it, made JSON-able."""
    if isinstance(value, UploadedFile):
        # request.data[name] for a file part is the uploaded file itself.
        return {"filename": value.name, "size": value.size}
    if isinstance(value, MultiValueDict):  # QueryDict: data[name] is the LAST value
        return {name: plain(value[name]) for name in value}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def make_handler(route_name):
    def handler(self, request, **captures):
        answer = {
            "route": route_name,
            "method": request.method,
            "path": captures,
            "query": plain(request.query_params),
            "body": plain(request.data),
        }
        # A plain HttpResponse: DRF's JSONRenderer refuses what the parser accepted (1e400, lone
        # surrogates) and would turn an effect into a 500.
        return HttpResponse(json_text(answer), status=201, content_type="application/json")

    return handler


def django_pattern(template):
    # '/repos/{owner}/{repo}/issues' -> 'repos/<str:owner>/<str:repo>/issues' (Django patterns have
    # no leading slash; a trailing slash stays exactly as the template has it).
    return re.sub(r"\{([^{}]+)\}", r"<str:\1>", template.lstrip("/"))


with open(os.environ["ORACLE_ROUTES"], encoding="utf-8") as f:
    routes = json.load(f)["routes"]

# One APIView per URL, with a handler per method, as a Django app writes it: two routes on the same
# path with different methods must not shadow each other (Django stops at the first matching
# pattern, and the view answers 405 for methods it lacks).
views = {}
for route in routes:
    pattern = django_pattern(route["path"])
    views.setdefault(pattern, {})[route["method"].lower()] = make_handler(route["name"])

urlpatterns = [
    url_path(pattern, type("RouteView%d" % i, (APIView,), handlers).as_view())
    for i, (pattern, handlers) in enumerate(views.items())
]

server = ThreadedWSGIServer(("127.0.0.1", int(os.environ["ORACLE_PORT"])), WSGIRequestHandler)
server.set_app(get_wsgi_application())
print("ORACLE READY", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
