"""Sending a run's alerts to webhooks: one JSON POST per configured URL.

Delivery never fails the run: a receiver that is down, slow or answers an error is
recorded as not delivered (with why, in the alerts snapshot's meta) and printed. URLs
are shown as scheme and host only (their path often is the secret), and the payload
carries the alerts and run ids only — never a key or a config.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from essaybench.bench.alerts import shown_url


@dataclass(frozen=True)
class Delivery:
    url: str  # as shown: scheme and host only
    delivered: bool
    status_code: int | None
    error: str | None
    seconds: float

    def line(self) -> str:
        if self.delivered:
            return f"delivered to {self.url} (HTTP {self.status_code}, {self.seconds:.2f} s)"
        return f"NOT delivered to {self.url}: {self.error}"


def _post(client: httpx.Client, url: str, payload: dict[str, Any]) -> Delivery:
    shown = shown_url(url)
    started = time.perf_counter()
    try:
        response = client.post(url, json=payload)
    except httpx.HTTPError as exc:
        kind = ("connection refused" if isinstance(exc, httpx.ConnectError)
                and "refused" in str(exc).lower() else type(exc).__name__)
        return Delivery(shown, False, None, f"{kind} after {time.perf_counter() - started:.2f} s",
                        round(time.perf_counter() - started, 3))
    seconds = round(time.perf_counter() - started, 3)
    if response.is_success:
        return Delivery(shown, True, response.status_code, None, seconds)
    return Delivery(shown, False, response.status_code,
                    f"HTTP {response.status_code} from the receiver", seconds)


def deliver(urls: Sequence[str], payload: dict[str, Any], timeout_s: float) -> list[Delivery]:
    """POST ``payload`` to every URL, one after another; never raises for a receiver."""
    if not urls:
        return []
    with httpx.Client(timeout=httpx.Timeout(timeout_s), follow_redirects=False) as client:
        return [_post(client, url, payload) for url in urls]
