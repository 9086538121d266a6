"""What a client script prints for each call it made: one JSON line the vitest suite reads.

`surfaced` is the text the library itself puts in front of its user (the exception's message, or
the detail a caller reads from the body the library returned): the suite checks that the gate's
reason is in it, so an agent reading only what its SDK says still learns why nothing was sent.
"""
import json
import sys


def emit(status, headers, surfaced, error=None, body=None):
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    print(
        json.dumps(
            {
                "status": status,
                "verdict": headers.get("effectgate-verdict"),
                "operation": headers.get("effectgate-operation"),
                "error": error,
                "surfaced": surfaced,
                "body": body,
            }
        ),
        flush=True,
    )


def detail_of(text):
    """The `detail` of a gate-made problem document, or the text itself."""
    try:
        return json.loads(text).get("detail") or text
    except (ValueError, AttributeError):
        return text


def usage(argv, expected):
    if len(argv) != len(expected) + 1:
        sys.exit("usage: %s %s" % (argv[0], " ".join(expected)))
    return argv[1:]
