"""OpenAI's Batch API: JSONL upload (purpose ``batch``), ``POST /batches`` with a 24 h window,
status ``validating -> in_progress -> finalizing -> completed`` (or ``failed``, ``expired``,
``cancelling -> cancelled``), then output and error files keyed by ``custom_id``.

Each line's body is exactly the body a direct call sends (``ModelSpec.request_json``), so a
line is the same request as the direct call with the same key.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import httpx

from essaybench.llm.batch.wire import (
    BatchApiError,
    BatchItem,
    BatchState,
    Line,
    check_custom_id,
    http_error,
    jsonl,
    read_jsonl,
)
from essaybench.llm.registry import ModelSpec

__all__ = ["OpenAIBatchApi"]

CHAT_URL = "/v1/chat/completions"
MARKER = "essaybench_submission"
_ENDED = {"completed", "failed", "expired", "cancelled"}


def input_file(spec: ModelSpec, items: Sequence[BatchItem]) -> bytes:
    """The batch input: one ``{custom_id, method, url, body}`` line per item."""
    return jsonl([{"custom_id": check_custom_id(item.custom_id), "method": "POST",
                   "url": CHAT_URL,
                   "body": json.loads(spec.request_json(item.request.messages,
                                                        item.request.params,
                                                        item.request.response_schema))}
                  for item in items])


def _line(row: dict[str, Any]) -> Line:
    cid = row["custom_id"]
    response, error = row.get("response"), row.get("error")
    if isinstance(response, dict) and response.get("status_code") == 200:
        body = response.get("body")
        if isinstance(body, dict) and _readable(body):
            return Line(cid, payload=body)
        return Line(cid, kind="errored", status=200, code="bad_response",
                    error=f"unreadable 200 body: {str(body)[:200]!r}")
    if isinstance(response, dict):
        body = response.get("body")
        err = body.get("error") if isinstance(body, dict) else None
        err = err if isinstance(err, dict) else {}
        status = response.get("status_code")
        return Line(cid, kind="errored", status=status if isinstance(status, int) else 0,
                    code=str(err.get("code") or err.get("type") or "") or None,
                    error=f"HTTP {status}: {err.get('message', '')}")
    error = error if isinstance(error, dict) else {}
    code = str(error.get("code") or "")
    kind = {"batch_expired": "expired", "batch_cancelled": "canceled"}.get(code, "errored")
    return Line(cid, kind=kind, status=0 if kind == "errored" else None,  # type: ignore[arg-type]
                code=code or None, error=str(error.get("message") or code))


def _readable(body: dict[str, Any]) -> bool:
    choices = body.get("choices")
    return (isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict)
            and isinstance(choices[0].get("message"), dict))


class OpenAIBatchApi:
    name = "openai"

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http  # base_url: the entry's (…/v1), auth headers set

    async def _json(self, what: str, response: httpx.Response) -> dict[str, Any]:
        if response.status_code != 200:
            raise http_error(what, response)
        data = response.json()
        if not isinstance(data, dict):
            raise BatchApiError(f"{what}: not a JSON object", transient=True)
        return data

    async def create(self, spec: ModelSpec, items: Sequence[BatchItem], marker: str) -> str:
        uploaded = await self._json("upload", await self.http.post(
            "/files", files={"file": (f"{marker}.jsonl", input_file(spec, items))},
            data={"purpose": "batch"}))
        batch = await self._json("create batch", await self.http.post("/batches", json={
            "input_file_id": uploaded["id"], "endpoint": CHAT_URL, "completion_window": "24h",
            "metadata": {MARKER: marker}}))
        return str(batch["id"])

    async def find(self, marker: str, n_items: int, since: datetime,
                   known: set[str]) -> str | None:
        after: str | None = None
        for _ in range(20):  # newest first; an unrecorded batch is among the latest
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._json("list batches", await self.http.get("/batches",
                                                                         params=params))
            for batch in page.get("data") or []:
                meta = batch.get("metadata") or {}
                if meta.get(MARKER) == marker:
                    return str(batch["id"])
                if batch.get("created_at", 0) < since.timestamp() - 3600:
                    return None
            if not page.get("has_more"):
                return None
            after = page.get("last_id")
        return None

    async def state(self, batch_id: str) -> BatchState:
        batch = await self._json("batch status", await self.http.get(f"/batches/{batch_id}"))
        status = str(batch.get("status"))
        failed = None
        if status == "failed":
            errors = (batch.get("errors") or {}).get("data") or [{}]
            failed = "; ".join(f"{e.get('code')}: {e.get('message')}" for e in errors[:3])
        return BatchState(status, status in _ENDED, failed,
                          {k: batch.get(k) for k in ("output_file_id", "error_file_id")})

    async def results(self, state: BatchState, batch_id: str) -> dict[str, Line]:
        lines: dict[str, Line] = {}
        for name in ("output_file_id", "error_file_id"):
            file_id = (state.info or {}).get(name)
            if not file_id:
                continue
            response = await self.http.get(f"/files/{file_id}/content")
            if response.status_code != 200:
                raise http_error(f"download {name}", response)
            for row in read_jsonl(response.content):
                lines[row["custom_id"]] = _line(row)
        return lines

    async def cancel(self, batch_id: str) -> None:
        await self._json("cancel batch", await self.http.post(f"/batches/{batch_id}/cancel"))
