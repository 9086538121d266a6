"""Differential oracle: FastAPI 0.92 / Starlette 0.26 served by uvicorn 0.17, all defaults.

Routes are '/repos/{owner}/...' (Starlette's default: one segment, [^/]+) added with
add_api_route for the route's method only; the Router keeps redirect_slashes. The body is
declared the way a handler takes an untyped JSON object, so FastAPI's own code decides when a
request body is JSON (and answers 422 when it is not an object).
"""
import copy
import json
import os
from typing import Any, Dict, Optional

import uvicorn
from fastapi import Body, FastAPI, Request
from fastapi.responses import Response

app = FastAPI()


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


def make_endpoint(route_name):
    async def endpoint(request: Request, body: Optional[Dict[str, Any]] = Body(None)):
        query = request.query_params
        answer = {
            "route": route_name,
            "method": request.method,
            "path": dict(request.path_params),
            # query_params[name] gives the LAST value of a repeated name.
            "query": {name: query[name] for name in query},
            "body": body,
        }
        # Not JSONResponse: it refuses what the JSON reader accepted (NaN, 1e400, lone surrogates)
        # and would turn an effect into a 500.
        return Response(json_text(answer), status_code=201, media_type="application/json")

    return endpoint


with open(os.environ["ORACLE_ROUTES"], encoding="utf-8") as f:
    routes = json.load(f)["routes"]

for i, route in enumerate(routes):
    # The gate's template syntax is already Starlette's: '{owner}' is one segment.
    app.add_api_route(
        route["path"], make_endpoint(route["name"]), methods=[route["method"]], name="route%d" % i
    )


class Server(uvicorn.Server):
    async def startup(self, sockets=None):
        await super().startup(sockets=sockets)
        # Sockets are bound once startup returns; a failed bind sets should_exit instead.
        if not self.should_exit:
            print("ORACLE READY", flush=True)


# uvicorn's default logging sends access lines to stdout; the protocol keeps stdout for
# 'ORACLE READY' alone.
log_config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
log_config["handlers"]["access"]["stream"] = "ext://sys.stderr"

Server(
    uvicorn.Config(app, host="127.0.0.1", port=int(os.environ["ORACLE_PORT"]), log_config=log_config)
).run()
