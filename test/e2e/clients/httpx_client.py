"""httpx through the gate (HTTP_PROXY / HTTPS_PROXY, SSL_CERT_FILE), as an agent uses it.

  httpx_client.py URL TITLE   POST the same entry twice, one call each

httpx retries only connection failures on its own (HTTPTransport(retries=...)), never a status, so
a response the gate answers for is never retried by it: the second call is the agent's own repeat.
"""
import sys

import httpx

from report import detail_of, emit, usage

url, title = usage(sys.argv, ["URL", "TITLE"])
with httpx.Client(timeout=30) as client:
    for _ in range(2):
        r = client.post(url, json={"title": title})
        try:
            r.raise_for_status()
            emit(r.status_code, r.headers, None, body=r.json())
        except httpx.HTTPStatusError as e:
            emit(r.status_code, r.headers, "%s: %s" % (e, detail_of(r.text)), type(e).__name__)
