"""Posting a run's summary as JSON to a webhook (an alerting endpoint, a chat hook)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import urlparse

from search._errors import SpecError

TIMEOUT_S = 10.0


def check_webhook_url(url: str) -> str:
    """An http(s) URL with a host, or a `SpecError` naming --webhook."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise SpecError(f"--webhook: {url!r} is not an http:// or https:// URL with a host")
    return url


def post_json(url: str, data: dict, timeout_s: float = TIMEOUT_S) -> str | None:
    """POST `data` as JSON; None when delivered (2xx), else why not, in words."""
    body = json.dumps(data, default=str).encode()
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        return f"the webhook answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError) as exc:
        return f"could not reach the webhook: {getattr(exc, 'reason', exc)}"
    return None if 200 <= status < 300 else f"the webhook answered HTTP {status}"
