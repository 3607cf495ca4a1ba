from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from essaybench.llm.retry import Backoff, classify_http_error, parse_retry_after


def test_retry_after_seconds_and_http_date() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(format_datetime(now + timedelta(seconds=7), usegmt=True),
                             now=now) == pytest.approx(7.0)
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None


def test_backoff_full_jitter_is_bounded_and_seeded() -> None:
    b = Backoff(base_s=0.5, cap_s=4.0)
    delays = [b.delay(r, random.Random(1)) for r in range(8)]
    assert delays == [b.delay(r, random.Random(1)) for r in range(8)]
    for r, d in enumerate(delays):
        assert 0 <= d <= min(4.0, 0.5 * 2 ** r)


def test_backoff_honours_retry_after_with_small_jitter() -> None:
    b = Backoff(base_s=0.5, max_retry_after_s=60)
    d = b.delay(0, random.Random(0), retry_after_s=3.0)
    assert 3.0 <= d <= 3.25
    assert b.delay(0, random.Random(0), retry_after_s=1e6) <= 60.25


@pytest.mark.parametrize("status,code,message,expected", [
    (429, None, "slow down", (True, "http_429")),
    (500, None, "oops", (True, "http_500")),
    (502, None, "", (True, "http_502")),
    (503, None, "", (True, "http_503")),
    (504, None, "", (True, "http_504")),
    (400, "context_length_exceeded", "too long", (False, "context_length")),
    (400, None, "This model's maximum context length is 8192 tokens", (False, "context_length")),
    (400, "content_filter", "blocked", (False, "content_filter")),
    (400, None, "bad request", (False, "http_400")),
    (401, None, "invalid key", (False, "http_401")),
    (403, None, "", (False, "http_403")),
    (404, "model_not_found", "", (False, "http_404")),
])
def test_classification(status: int, code: str | None, message: str,
                        expected: tuple[bool, str]) -> None:
    assert classify_http_error(status, code, message) == expected
