"""Secrets out of untrusted text: what a provider or an exception says is redacted before
it is stored or printed.

A provider's 401 body echoes the key it was given ("Incorrect API key provided: sk-…"),
and an exception may carry a header or a URL. ``redact`` removes, in this order:

1. the values of the environment variables that hold keys: every ``api_key_env`` of a
   model registry (registered when one is loaded, see ``register_secret_envs``), plus any
   variable whose name says it holds a secret (``*_API_KEY``, ``*TOKEN*``, ``*SECRET*``…);
2. bearer tokens ("Authorization: Bearer …");
3. ``sk-…``-like keys (OpenAI, DeepSeek, Anthropic and most OpenAI-compatible providers),
   masked ones included ("sk-proj-****1234");
4. ``api_key=…`` / ``token=…`` pairs, as in a URL's query.

Values are read from the environment at each call (a key set after import still counts).
A value shorter than ``MIN_SECRET_CHARS`` is not replaced: redacting "1" or "true" from
every message would destroy it and protect nothing.
"""

from __future__ import annotations

import logging
import os
import re
import traceback
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 6

# Variable names that say "this holds a secret" (matched upper-cased, as a word part).
_SECRET_NAME = re.compile(r"(^|_)(API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)")
_BEARER = re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/=*\-]+")
_SK_LIKE = re.compile(r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_*\-]{6,}")
_PAIR = re.compile(r"(?i)\b(api[_-]?key|access[_-]?token|token|secret|password)"
                   r"([\"']?\s*[=:]\s*[\"']?)(?!\[REDACTED\])[^\s\"'&,;}]{4,}")

_registered: set[str] = set()


def register_secret_envs(names: Iterable[str | None]) -> None:
    """Remember environment variables that hold keys (a registry's ``api_key_env``s), so
    every later ``redact`` in this process removes their values."""
    _registered.update(n for n in names if n)


def secret_values(env_names: Iterable[str | None] = ()) -> list[str]:
    """The values to redact, longest first (a key containing another is removed whole):
    those of ``env_names``, of the registered variables and of secret-named variables."""
    names = {n for n in env_names if n} | _registered
    names |= {n for n in os.environ if _SECRET_NAME.search(n.upper())}
    values = {v.strip() for n in names if (v := os.environ.get(n))}
    return sorted((v for v in values if len(v) >= MIN_SECRET_CHARS), key=len, reverse=True)


def redact(text: str, env_names: Iterable[str | None] = ()) -> str:
    """``text`` without secrets (see the module docstring); ``env_names``: variables whose
    values are secrets besides the registered and secret-named ones."""
    return redact_values(text, secret_values(env_names))


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """``text`` without the given secret values (longest first) and secret-shaped strings."""
    for value in secrets:
        if value in text:
            text = text.replace(value, REDACTED)
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    text = _SK_LIKE.sub(REDACTED, text)
    return _PAIR.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)


def redact_optional(text: str | None, env_names: Iterable[str | None] = ()) -> str | None:
    """``redact`` for a value that may be missing."""
    return None if text is None else redact(text, env_names)


def install_log_redaction() -> None:
    """Redact every log record this process makes from now on: its message and its
    traceback (an exception's text may carry a key), before any handler formats or ships
    it (Prefect's API handler stores logs in its database). Idempotent."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, _MARK, False):
        return

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return _redacted_record(previous(*args, **kwargs))

    setattr(factory, _MARK, True)
    logging.setLogRecordFactory(factory)


_MARK = "_essaybench_redacts"


def _redacted_record(record: logging.LogRecord) -> logging.LogRecord:
    secrets = secret_values()
    try:
        message = record.getMessage()
    except (TypeError, ValueError):  # a bad format: the handler reports it as it would
        return record
    record.msg, record.args = redact_values(message, secrets), None
    if record.exc_info and record.exc_info[0] is not None:
        # Formatters append exc_text when it is set and format exc_info only when it is
        # not: the traceback is rendered (and redacted) here, once.
        text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        record.exc_text, record.exc_info = redact_values(text, secrets), None
    if record.stack_info:
        record.stack_info = redact_values(record.stack_info, secrets)
    return record
