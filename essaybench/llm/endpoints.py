"""Where this host sends a model's calls: ``$ESSAYBENCH_ENDPOINTS``.

A self-hosted model (vLLM, llama.cpp, TGI…) often runs as one server per worker host,
each reached at an address only that host knows (its own loopback, a GPU box beside it).
The registry entry's ``base_url`` stays the model's name everywhere: request keys, the
ledger's ``endpoint`` and every stored record use it, and a sharded run's plan pins it,
so every host sends identical requests and a rerun on another host finds its calls.
The variable says, per host, where those requests actually go::

    ESSAYBENCH_ENDPOINTS="qwen-7b=http://127.0.0.1:8000/v1,judge-32b=http://gpu-b:8001/v1"
    ESSAYBENCH_ENDPOINTS="http://qwen.internal/v1=http://127.0.0.1:8000/v1"

Each item is ``KEY=URL``, items separated by commas or whitespace. KEY is a registry
entry's name, or a ``base_url`` (every entry with that base_url; an entry's own name
wins). Entries the variable does not name go to their ``base_url``; names the registry
does not have are ignored (one host's variable serves runs of different models). Every
host's server must serve the same model files: the records cannot tell them apart. The
embedded model cannot be redirected (each host starts its own already).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from pydantic import ValidationError

from essaybench.core.errors import UserError
from essaybench.llm.registry import Registry

ENDPOINTS_ENV = "ESSAYBENCH_ENDPOINTS"
_ITEM_SEP = re.compile(r"[,\s]+")


class EndpointsError(UserError, ValueError):
    """$ESSAYBENCH_ENDPOINTS cannot be read: one line naming the item."""


def parse_endpoints(text: str) -> dict[str, str]:
    """``KEY=URL`` items (module doc) as a mapping; a malformed item is refused."""
    out: dict[str, str] = {}
    for item in filter(None, _ITEM_SEP.split(text.strip())):
        # A base_url key holds no "=" (no query allowed), so the first one splits.
        key, sep, url = item.partition("=")
        if not sep or not key or not url:
            raise EndpointsError(f"{ENDPOINTS_ENV}: {item!r} is not KEY=URL (a registry "
                                 "entry's name or base_url, '=', the URL this host uses)")
        out[key.rstrip("/")] = url
    return out


def host_endpoints(registry: Registry, models: Sequence[str],
                   environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The URL this host uses for each of ``models`` that ``$ESSAYBENCH_ENDPOINTS``
    redirects (validated as a ``base_url``); the others are left out."""
    environ = os.environ if environ is None else environ
    given = parse_endpoints(environ.get(ENDPOINTS_ENV, ""))
    if not given:
        return {}
    out: dict[str, str] = {}
    for name in models:
        spec = registry.get(name)
        url = given.get(name) or given.get(spec.base_url.rstrip("/"))
        if url is None:
            continue
        if spec.is_embedded:
            raise EndpointsError(f"{ENDPOINTS_ENV} names {name!r}, the embedded model: each "
                                 "host starts its own server of it; leave it out")
        try:
            out[name] = spec.with_base_url(url).base_url
        except ValidationError as exc:
            why = exc.errors()[0]["msg"].removeprefix("Value error, ")
            raise EndpointsError(f"{ENDPOINTS_ENV}: the URL for {name!r} is not usable: "
                                 f"{why}") from None
    return out
