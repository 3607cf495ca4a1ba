"""The one place a call's result is redacted: before the ledger stores it and before any
stage sees it (``Gateway`` applies ``ResultRedactor`` to every result a backend returns).

What a provider says about a failed call is untrusted text that may quote the key it was
sent ("Incorrect API key provided: sk-…"): the error and the raw reply of a call that did
not end ``ok`` are redacted (``essaybench.core.redact``). An ``ok`` reply is the
measurement itself, and its parsed JSON must stay equal to its text: it is kept as sent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from essaybench.core.redact import redact_values, register_secret_envs, secret_values
from essaybench.llm.types import ChatResult


class ResultRedactor:
    """Redacts results of calls to models whose keys come from ``env_names`` (a registry's
    ``api_key_env``s; secret-named variables and any registered ones count too)."""

    def __init__(self, env_names: Iterable[str | None]) -> None:
        self.env_names = sorted({n for n in env_names if n})
        register_secret_envs(self.env_names)  # exceptions stored elsewhere are redacted too

    def __call__(self, result: ChatResult) -> ChatResult:
        if result.ok or (result.error is None and result.text is None):
            return result
        secrets = secret_values(self.env_names)  # read now: a key may be set late
        error = None if result.error is None else redact_values(result.error, secrets)
        text = None if result.text is None else redact_values(result.text, secrets)
        if error == result.error and text == result.text:
            return result
        return dataclasses.replace(result, error=error, text=text)
