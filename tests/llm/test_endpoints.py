"""$ESSAYBENCH_ENDPOINTS (llm.endpoints): where this host sends a model's calls, while the
registry's base_url stays the model's name in request keys and records."""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.llm.client import request_key
from essaybench.llm.endpoints import (
    ENDPOINTS_ENV,
    EndpointsError,
    host_endpoints,
    parse_endpoints,
)
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.ledger import Ledger
from essaybench.llm.session import LEDGER_FILE, open_gateway
from essaybench.llm.types import ChatRequest, Message
from tests.llm.conftest import fake_spec, registry_of


def test_items_by_name_or_base_url_and_malformed_ones_refused() -> None:
    assert parse_endpoints(" a=http://x:1/v1, http://m.invalid/v1/=http://y/v1\n"
                           "b=http://z/v1 ") == {"a": "http://x:1/v1", "b": "http://z/v1",
                                                 "http://m.invalid/v1": "http://y/v1"}
    assert parse_endpoints("") == {}
    for bad in ("oops", "a=", "=http://x/v1"):
        with pytest.raises(EndpointsError, match="is not KEY=URL"):
            parse_endpoints(bad)


def test_a_name_wins_over_its_base_url_and_other_names_are_ignored() -> None:
    registry = registry_of(fake_spec("a"), fake_spec("b"),
                           fake_spec("c", base_url="http://other.invalid/v1"))
    env = {ENDPOINTS_ENV: "http://fake.invalid/v1=http://10.0.0.1:8000/v1 "
                          "a=http://127.0.0.1:9/v1/ nobody=http://x/v1"}
    assert host_endpoints(registry, ["a", "b", "c"], env) == {
        "a": "http://127.0.0.1:9/v1", "b": "http://10.0.0.1:8000/v1"}
    assert host_endpoints(registry, ["a", "b"], {}) == {}


def test_unusable_urls_and_the_embedded_model_are_refused() -> None:
    registry = registry_of(fake_spec("a"), fake_spec("e", base_url="embedded"))
    for url in ("ftp://x/v1", "http://user:secret@x/v1"):
        with pytest.raises(EndpointsError, match="the URL for 'a' is not usable") as caught:
            host_endpoints(registry, ["a"], {ENDPOINTS_ENV: f"a={url}"})
        assert "secret" not in str(caught.value)
    with pytest.raises(EndpointsError, match="'e', the embedded model"):
        host_endpoints(registry, ["e"], {ENDPOINTS_ENV: "e=http://127.0.0.1:8080/v1"})


def test_calls_go_to_this_hosts_server_under_the_entrys_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two hosts, each with its own server of the model: the second finds the first's call
    in the ledger (same key), and the record names the registry's base_url."""
    registry = registry_of(fake_spec())
    requests = [ChatRequest(model="fake", stage="generate", tag="p1",
                            messages=(Message(role="user", content="写一篇秋天的作文"),))]
    with run_fake_server() as here:
        monkeypatch.setenv(ENDPOINTS_ENV, f"fake={here.base_url}")
        with open_gateway(registry, tmp_path, ["fake"]) as session:
            first = session.run(requests)
        assert first[0].ok and here.stats().totals.completed == 1
    assert first[0].key == request_key(registry.get("fake"), requests[0])
    with run_fake_server() as there:
        monkeypatch.setenv(ENDPOINTS_ENV, f"http://fake.invalid/v1={there.base_url}")
        with open_gateway(registry, tmp_path, ["fake"]) as session:
            again = session.run(requests)
        assert again[0].from_ledger and there.stats().totals.received == 0
    with Ledger(tmp_path / LEDGER_FILE) as ledger:
        rows = ledger.query("SELECT endpoint FROM llm_calls")
    assert rows == [{"endpoint": "http://fake.invalid/v1"}]
