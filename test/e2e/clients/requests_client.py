"""requests through the gate (HTTP_PROXY / HTTPS_PROXY, REQUESTS_CA_BUNDLE), as an agent uses it.

  requests_client.py URL TITLE twice   POST the same entry twice, one call each
  requests_client.py URL TITLE retry   POST it once, urllib3 retrying a 502/503/504 on its own
"""
import sys

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from report import detail_of, emit, usage

url, title, mode = usage(sys.argv, ["URL", "TITLE", "twice|retry"])
session = requests.Session()
if mode == "retry":
    # The retry an agent framework configures: POST included (allowed_methods=None), no backoff.
    retry = Retry(
        total=2,
        status_forcelist=[502, 503, 504],
        allowed_methods=None,
        backoff_factor=0,
        raise_on_status=False,
    )
    session.mount("http://", HTTPAdapter(max_retries=retry))
    session.mount("https://", HTTPAdapter(max_retries=retry))

for _ in range(1 if mode == "retry" else 2):
    r = session.post(url, json={"title": title}, timeout=30)
    try:
        r.raise_for_status()
        emit(r.status_code, r.headers, None, body=r.json())
    except requests.HTTPError as e:
        emit(r.status_code, r.headers, "%s: %s" % (e, detail_of(r.text)), type(e).__name__)
