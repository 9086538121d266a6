"""Differential oracle: Flask 2.2 on Werkzeug 2.2's development server, all defaults.

Rules are '/repos/<owner>/...' (Werkzeug's default converter: one segment, [^/]+), registered for
the route's method only; strict_slashes and merge_slashes keep their defaults. Flask adds OPTIONS
(and HEAD beside GET) to every rule by itself.
"""
import json
import os
import re

from flask import Flask, request
from werkzeug.serving import make_server

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")

app = Flask(__name__)


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


def first_values(multidict):
    # request.form[name] / request.args[name] give the FIRST value of a repeated name.
    return {name: multidict[name] for name in multidict}


def read_body():
    if request.is_json:  # application/json or application/*+json
        # Malformed JSON reads as None here: the action still runs, with no body.
        return request.get_json(silent=True)
    if request.mimetype in FORM_TYPES:
        # File parts are in request.files, not request.form: an action reading form fields
        # never sees them.
        return first_values(request.form)
    return None


def make_view(route_name):
    def view(**captures):
        answer = {
            "route": route_name,
            "method": request.method,
            "path": captures,
            "query": first_values(request.args),
            "body": read_body(),
        }
        return app.response_class(json_text(answer), status=201, mimetype="application/json")

    return view


with open(os.environ["ORACLE_ROUTES"], encoding="utf-8") as f:
    routes = json.load(f)["routes"]

for i, route in enumerate(routes):
    rule = re.sub(r"\{([^{}]+)\}", r"<\1>", route["path"])
    app.add_url_rule(
        rule, endpoint="route%d" % i, view_func=make_view(route["name"]), methods=[route["method"]]
    )

# run_simple without reloader or debugger is exactly make_server(...).serve_forever(); calling
# them directly lets us announce readiness only once the socket is listening.
server = make_server("127.0.0.1", int(os.environ["ORACLE_PORT"]), app, threaded=True)
print("ORACLE READY", flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    pass
