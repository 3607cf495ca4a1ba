"""Webhook delivery against a real HTTP receiver on 127.0.0.1, and against one that is
down: a receiver that is down or answers an error is recorded as not delivered, and
delivery never raises."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from essaybench.runs.webhooks import deliver
from tests.helpers import Receiver, closed_port_url


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as r:
        yield r


PAYLOAD = {"run_id": "r2", "base_run": "r1", "n_alerts": 1,
           "alerts": [{"model": "writer", "kind": "off_language"}]}


def test_delivers_json_to_a_real_receiver(receiver: Receiver) -> None:
    [sent] = deliver([receiver.url], PAYLOAD, timeout_s=5)
    assert sent.delivered and sent.status_code == 200
    assert receiver.bodies == [PAYLOAD]
    assert receiver.headers[0]["Content-Type"] == "application/json"
    assert "secret-token" not in sent.url and "secret-token" not in sent.line()


def test_a_receiver_that_is_down_is_recorded_not_raised(receiver: Receiver) -> None:
    down = closed_port_url()
    with Receiver(status=500) as failing:
        results = deliver([down, failing.url, receiver.url], PAYLOAD, timeout_s=2)
    assert [r.delivered for r in results] == [False, False, True]  # the others still get it
    assert results[0].status_code is None and "refused" in (results[0].error or "")
    assert results[0].line().startswith("NOT delivered to http://127.0.0.1:")
    assert results[1].status_code == 500 and "HTTP 500" in (results[1].error or "")
    assert receiver.bodies == [PAYLOAD]


def test_no_urls_no_requests() -> None:
    assert deliver([], PAYLOAD, timeout_s=1) == []
