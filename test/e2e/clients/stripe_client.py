"""stripe-python through the gate: stripe.api_base at the Stripe stand-in, the proxy from
HTTPS_PROXY / HTTP_PROXY (its requests session reads them), and the gate's CA as
stripe.ca_bundle_path: the library passes that file as `verify` on every request, so it reads no
CA variable (REQUESTS_CA_BUNDLE is overridden by it).

  stripe_client.py API_BASE CA_FILE ORDER twice   create a PaymentIntent twice
  stripe_client.py API_BASE CA_FILE ORDER retry   create it once

Both with stripe.max_network_retries = 2: the library repeats a 409 or a 5xx on its own (with its
own Idempotency-Key) unless the answer says Stripe-Should-Retry: false.
"""
import sys

import stripe

from report import emit, usage

api_base, ca_file, order, mode = usage(sys.argv, ["API_BASE", "CA_FILE", "ORDER", "twice|retry"])
stripe.api_key = "sk_test_stand_in"
stripe.api_base = api_base
stripe.ca_bundle_path = ca_file
stripe.max_network_retries = 2

for _ in range(1 if mode == "retry" else 2):
    try:
        intent = stripe.PaymentIntent.create(amount=500, currency="usd", customer="cus_agent", description=order)
        emit(
            intent.last_response.code,
            dict(intent.last_response.headers),
            None,
            body={"title": intent["title"], "html_url": intent["html_url"]},
        )
    except stripe.error.StripeError as e:
        emit(e.http_status, dict(e.headers or {}), str(e), type(e).__name__)
