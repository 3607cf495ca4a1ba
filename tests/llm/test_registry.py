from __future__ import annotations

import copy
import json
import traceback
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from essaybench.llm.registry import (
    EMBEDDED,
    MODELS_ENV,
    ApiKeyMissingError,
    JudgeClashError,
    ModelSpec,
    Registry,
    RegistryError,
    check_judges,
    default_models_path,
    load_registry,
)
from essaybench.llm.types import Message

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
FAKE_KEY = "sk-essaybenchTEST0123456789abcdefSECRET"
KEY_ENV = "ESSAYBENCH_TEST_API_KEY"
SCHEMA: dict[str, Any] = {"title": "Judge reply!", "type": "object",
                          "properties": {"score": {"type": "integer"}}}
MESSAGES = (Message(role="system", content="sys"), Message(role="user", content="写一篇作文"))


def spec(**overrides: Any) -> ModelSpec:
    fields: dict[str, Any] = {
        "name": "m", "provider": "p", "base_url": "https://api.example.com/v1/",
        "api_key_env": KEY_ENV, "model_id": "model-x", "family": "fam",
        "default_params": {"temperature": 0.5, "max_tokens": 100, "top_p": 0.9},
        "structured_output": "json_schema",
        "price_input_per_mtok": 2.0, "price_output_per_mtok": 8.0,
    }
    fields.update(overrides)
    return ModelSpec.model_validate(fields)


def write_registry(tmp_path: Path, models: dict[str, Any]) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": models}, allow_unicode=True), encoding="utf-8")
    return path


def entry(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {"provider": "p", "base_url": "http://localhost:8000/v1",
                              "model_id": "x", "family": "fam"}
    fields.update(overrides)
    return fields


# --- shipped files -----------------------------------------------------------------------

def test_default_registry_enables_only_the_embedded_model() -> None:
    reg = load_registry(CONFIGS / "models.yaml")
    writers = ["smollm2-135m-para", "smollm2-135m-para-zh"]  # the demo's writer configurations
    assert reg.names() == ["smollm2-135m", *writers, "fake"]
    assert [s.name for s in reg.enabled()] == ["smollm2-135m", *writers]
    assert all(reg.get(w).is_embedded for w in writers)
    assert reg.get(writers[0]).writer_system_prompt is None
    assert (reg.get(writers[1]).writer_system_prompt or "").startswith("你是一名中文写作者。")
    # The judge ends no reply at a line break (its JSON may hold one); the writers do.
    assert "stop" not in reg.get("smollm2-135m").default_params
    assert all(reg.get(w).default_params["stop"] == ["\n"] for w in writers)
    assert all(reg.get(w).default_params["frequency_penalty"] == 1.0 for w in writers)
    smol = reg.get("smollm2-135m")
    assert smol.is_embedded and smol.endpoint == EMBEDDED
    assert smol.api_key() is None
    assert smol.structured_output == "json_object" and smol.max_concurrency == 2
    assert "temperature" not in smol.default_params  # set per call: 0.8 generate, 0.2 judge
    assert smol.cost_usd(1000, 1000) == 0.0 and smol.cost_usd(None, None) == 0.0
    fake = reg.get("fake")
    assert not fake.enabled and fake.base_url == "http://127.0.0.1:0/v1"


def test_examples_registry_is_valid_and_all_disabled() -> None:
    reg = load_registry(CONFIGS / "models.examples.yaml")
    assert reg.enabled() == []
    envs = {s.api_key_env for s in reg.models.values()}
    assert envs == {"OPENAI_API_KEY", "DEEPSEEK_API_KEY", "DASHSCOPE_API_KEY", "ARK_API_KEY",
                    "ZHIPUAI_API_KEY", "XAI_API_KEY", None}
    for s in reg.models.values():
        if s.api_key_env is None:  # self-hosted servers
            assert s.base_url.startswith("http://localhost:")
            assert s.price_input_per_mtok is None  # hardware cost: unknown, not zero
        else:
            assert s.base_url.startswith("https://")
            assert s.price_input_per_mtok is not None and s.price_output_per_mtok is not None
    assert reg.get("deepseek-reasoner").base_url == "https://api.deepseek.com/v1"
    assert reg.get("qwen-plus").base_url == (
        "https://dashscope.aliyuncs.com/compatible-mode/v1")
    assert reg.get("qwen-plus").family == reg.get("vllm-qwen2.5-7b").family == "qwen"


def test_registry_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write_registry(tmp_path, {"only": entry()})
    monkeypatch.setenv(MODELS_ENV, str(path))
    assert default_models_path() == path
    assert load_registry().names() == ["only"]
    monkeypatch.delenv(MODELS_ENV)
    assert default_models_path() == CONFIGS / "models.yaml"


# --- validation ---------------------------------------------------------------------------

def test_errors_name_the_file_the_entry_and_the_field(tmp_path: Path) -> None:
    path = write_registry(tmp_path, {"good": entry(), "bad": entry(max_concurency=3)})
    with pytest.raises(RegistryError) as exc:
        load_registry(path)
    msg = str(exc.value)
    line = path.read_text(encoding="utf-8").splitlines().index("    max_concurency: 3") + 1
    assert msg.startswith(f"{path}:{line}: model registry: models.bad.max_concurency: ")


@pytest.mark.parametrize("url", ["ftp://host/v1", "localhost:8000/v1", "https://", "Embedded",
                                 "http://host:notaport/v1"])
def test_bad_base_urls_are_rejected(url: str) -> None:
    with pytest.raises(ValidationError, match="base_url"):
        spec(base_url=url)


def test_base_url_is_normalised_and_replaceable() -> None:
    s = spec()
    assert s.base_url == "https://api.example.com/v1"
    moved = s.with_base_url("http://127.0.0.1:5123/v1/")
    assert moved.base_url == "http://127.0.0.1:5123/v1" and moved.model_id == s.model_id
    with pytest.raises(ValidationError):
        s.with_base_url("not a url")


@pytest.mark.parametrize("name", ["openai_api_key", "OPENAI-API-KEY", "X" * 65,
                                  "ABCDEF0123456789ABCDEF0123456789", "1ST_KEY", ""])
def test_api_key_env_must_look_like_a_variable_name(name: str) -> None:
    with pytest.raises(ValidationError, match="api_key_env"):
        spec(api_key_env=name)


def test_reserved_and_out_of_range_params_are_rejected() -> None:
    bads: list[dict[str, Any]] = [
        {"model": "y"}, {"response_format": {}}, {"stream": True},
        {"temperature": 3}, {"top_p": 0}, {"max_tokens": 0}, {"max_tokens": 1.5}]
    for bad in bads:
        with pytest.raises(ValidationError, match="default_params"):
            spec(default_params=bad)
        with pytest.raises(ValueError):
            spec(default_params={}).request_body(MESSAGES, bad)


def test_structure_of_the_file_is_checked(tmp_path: Path) -> None:
    cases = {
        "extra top level": "models: {a: {provider: p, base_url: embedded, model_id: x, "
                           "family: f}}\nother: 1\n",
        "empty": "models: {}\n",
        "repeated": "models:\n  a: {provider: p, base_url: embedded, model_id: x, family: f}\n"
                    "  a: {provider: q, base_url: embedded, model_id: y, family: f}\n",
        "name differs": "models: {a: {name: b, provider: p, base_url: embedded, model_id: x, "
                        "family: f}}\n",
        "bad name": "models: {'a b': {provider: p, base_url: embedded, model_id: x, family: f}}\n",
    }
    for label, text in cases.items():
        path = tmp_path / "m.yaml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(RegistryError) as exc:
            load_registry(path)
        assert str(path) in str(exc.value), label
    with pytest.raises(RegistryError, match="not found"):
        load_registry(tmp_path / "missing.yaml")


def test_get_names_the_known_models() -> None:
    reg = load_registry(CONFIGS / "models.yaml")
    with pytest.raises(KeyError, match="known: fake, smollm2-135m, smollm2-135m-para"):
        reg.get("gpt-5")
    assert "fake" in reg and "gpt-5" not in reg


def test_registry_keys_must_match_spec_names() -> None:
    with pytest.raises(ValidationError):
        Registry(models={"other": spec()})


# --- keys ------------------------------------------------------------------------------

def test_api_key_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    s = spec()
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ApiKeyMissingError, match=KEY_ENV):
        s.api_key()
    monkeypatch.setenv(KEY_ENV, "   ")
    with pytest.raises(ApiKeyMissingError):
        s.api_key()
    monkeypatch.setenv(KEY_ENV, FAKE_KEY + "\n")
    assert s.api_key() == FAKE_KEY
    monkeypatch.setenv(KEY_ENV, "rotated")
    assert s.api_key() == "rotated"
    assert spec(api_key_env=None).api_key() is None


def _all_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc) + str(exc)


def test_the_key_appears_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    s = spec()
    assert s.api_key() == FAKE_KEY
    seen: list[str] = [
        repr(s), str(s), s.model_dump_json(), str(s.model_dump()), str(s.describe()),
        str(s.request_body(MESSAGES, {"temperature": 0.8}, SCHEMA)),
        str(s.effective_params({"seed": 1})),
    ]
    reg = Registry(models={"m": s})
    seen += [repr(reg), reg.model_dump_json()]

    # The commonest mistakes: the key pasted where its variable's name or the URL belongs,
    # or into the parameters; and a YAML syntax error on the line that holds it.
    bad_entries = [entry(api_key_env=FAKE_KEY),
                   entry(base_url=f"https://user:{FAKE_KEY}@api.example.com/v1"),
                   entry(base_url=f"https://api.example.com/v1?api_key={FAKE_KEY}"),
                   entry(default_params={"api_key": FAKE_KEY}),
                   entry(default_params={"Authorization": f"Bearer {FAKE_KEY}"})]
    for bad in bad_entries:
        path = write_registry(tmp_path, {"leaky": bad})
        with pytest.raises(RegistryError) as exc:
            load_registry(path)
        seen.append(_all_text(exc.value))
        fields = {**bad, "name": "leaky"}
        with pytest.raises(ValidationError) as verr:
            ModelSpec.model_validate(fields)
        seen.append(_all_text(verr.value))
    broken = tmp_path / "broken.yaml"
    broken.write_text(f"models:\n  m:\n    api_key_env: [{FAKE_KEY}\n", encoding="utf-8")
    with pytest.raises(RegistryError) as exc:
        load_registry(broken)
    seen.append(_all_text(exc.value))
    with pytest.raises(ValueError) as perr:
        s.request_body(MESSAGES, {"api_key": FAKE_KEY})
    seen.append(_all_text(perr.value))
    with pytest.raises(KeyError) as kerr:
        reg.get(FAKE_KEY[:3])
    seen.append(_all_text(kerr.value))

    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ApiKeyMissingError) as merr:
        s.api_key()
    seen.append(_all_text(merr.value))

    for text in seen:
        assert FAKE_KEY not in text
        assert FAKE_KEY[3:20] not in text  # not even a fragment


# --- request bodies ------------------------------------------------------------------

def test_request_body_merges_params_and_sets_model() -> None:
    s = spec()
    body = s.request_body(MESSAGES, {"temperature": 0.8, "seed": 7, "top_p": None})
    assert body["model"] == "model-x"
    assert body["messages"] == [{"role": "system", "content": "sys"},
                                {"role": "user", "content": "写一篇作文"}]
    assert body["temperature"] == 0.8  # per call wins
    assert body["max_tokens"] == 100 and body["seed"] == 7
    assert "top_p" not in body  # a per-call None removes the default
    assert "response_format" not in body  # no schema, no structured output
    params = s.effective_params({"temperature": 0.8, "seed": 7, "top_p": None})
    assert params == {"max_tokens": 100, "seed": 7, "temperature": 0.8}
    assert list(params) == sorted(params)
    assert {k: body[k] for k in params} == params
    assert s.default_params["top_p"] == 0.9  # the spec itself is untouched
    with pytest.raises(ValueError):
        s.request_body((), {})


def test_response_format_per_style() -> None:
    strict = spec(structured_output="json_schema").request_body(MESSAGES, None, SCHEMA)
    assert strict["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Judge_reply_", "schema": SCHEMA, "strict": True}}
    untitled = {"type": "object"}
    assert spec().request_body(MESSAGES, None, untitled)["response_format"][
        "json_schema"]["name"] == "response"
    llama = spec(structured_output="json_object").request_body(MESSAGES, None, SCHEMA)
    assert llama["response_format"] == {"type": "json_object", "schema": SCHEMA}
    plain = spec(structured_output="none").request_body(MESSAGES, None, SCHEMA)
    assert "response_format" not in plain


@pytest.mark.parametrize("style", ["json_schema", "json_object", "none"])
def test_request_json_is_the_body_encoded(style: str) -> None:
    s = spec(structured_output=style)
    schema = copy.deepcopy(SCHEMA)

    def plain() -> bytes:
        return json.dumps(s.request_body(MESSAGES, {"temperature": 0.8}, schema),
                          ensure_ascii=False, separators=(",", ":")).encode()

    assert s.request_json(MESSAGES, {"temperature": 0.8}, schema) == plain()
    assert s.request_json(MESSAGES, {"temperature": 0.8}, schema) == plain()  # from memory
    assert s.request_json(MESSAGES, {"temperature": 0.8}) == json.dumps(
        s.request_body(MESSAGES, {"temperature": 0.8}), ensure_ascii=False,
        separators=(",", ":")).encode()
    schema["properties"]["extra"] = {"type": "string"}  # changed in place: encoded afresh
    assert s.request_json(MESSAGES, {"temperature": 0.8}, schema) == plain()
    if style != "none":
        assert b'"extra"' in s.request_json(MESSAGES, None, schema)


def test_cost() -> None:
    s = spec(price_input_per_mtok=2.0, price_output_per_mtok=8.0)
    assert s.cost_usd(1_000_000, 500_000) == pytest.approx(6.0)
    assert s.cost_usd(1234, 0) == pytest.approx(1234 * 2 / 1e6)
    assert s.cost_usd(None, 10) is None  # usage unknown: unknown, not zero
    assert spec(price_output_per_mtok=None).cost_usd(10, 10) is None
    assert spec(price_input_per_mtok=0.0, price_output_per_mtok=0.0).cost_usd(None, 5) == 0.0


def test_entries_that_would_send_identical_requests_are_refused(tmp_path: Path) -> None:
    """Issue 13: two names for the same endpoint, model id and parameters had the same
    request keys; the gateway sent one call for both and generation aborted with
    "results out of order". Refused at load, naming both entries."""
    same = entry(model_id="qwen-max", default_params={"temperature": 0.8})
    path = write_registry(tmp_path, {"qwen": same, "other": entry(model_id="y"),
                                     "qwen-again": {**same, "max_concurrency": 2,
                                                    "base_url": "http://localhost:8000/v1/"}})
    with pytest.raises(RegistryError) as exc:
        load_registry(path)
    line = path.read_text(encoding="utf-8").splitlines().index("  qwen-again:") + 1
    assert str(exc.value) == (
        f"{path}:{line}: model registry: entries 'qwen' and 'qwen-again' would send identical "
        "requests (same base_url, model_id and default_params), so their calls could not be "
        "told apart: remove one, or make them differ (e.g. in a parameter)")
    # A parameter that differs keeps them apart (their requests have different keys).
    path = write_registry(tmp_path, {"qwen": same, "qwen-cool": {
        **same, "default_params": {"temperature": 0.2}}})
    assert load_registry(path).names() == ["qwen", "qwen-cool"]


def test_writer_configurations_differ_by_system_prompt_but_never_judge_together(
        tmp_path: Path) -> None:
    """Two writer configurations of one model (issue 14): entries that differ only in
    writer_system_prompt load (their essays are different requests), but their judge calls
    would be identical, so one run cannot judge with both."""
    same = entry(model_id="qwen-max")
    path = write_registry(tmp_path, {"qwen": same,
                                     "qwen-zh": {**same, "writer_system_prompt": "请用中文写作。"}})
    registry = load_registry(path)
    assert registry.get("qwen-zh").writer_system_prompt == "请用中文写作。"
    check_judges(registry, ["qwen", "qwen"])  # named twice is one judge
    with pytest.raises(JudgeClashError, match="judges 'qwen' and 'qwen-zh' would send "
                       "identical judge requests"):
        check_judges(registry, ["qwen", "qwen-zh"])
    # The same system prompt twice is the identical-request refusal again.
    path = write_registry(tmp_path, {"a": {**same, "writer_system_prompt": "x"},
                                     "b": {**same, "writer_system_prompt": "x"}})
    with pytest.raises(RegistryError, match="entries 'a' and 'b' would send identical"):
        load_registry(path)
