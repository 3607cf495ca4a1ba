"""OpenAI's Batch API on the fake: files, batches, status, output and error files, cancel.

Routes (all behind the scenario's bearer key, if it has one)::

    POST /v1/files                      multipart: file=<name>.jsonl, purpose=batch
    GET  /v1/files/{id}                 the file object
    GET  /v1/files/{id}/content         the bytes (input, output or error file)
    POST /v1/batches                    {input_file_id, endpoint, completion_window, metadata?}
    GET  /v1/batches[?limit&after]      newest first
    GET  /v1/batches/{id}
    POST /v1/batches/{id}/cancel

Wire shapes follow OpenAI's API reference (Batch object, Files, "request input" and
"request output" line objects) as summarised by the stored docs we read: the batch object
and ``errors.data[] = {code, message, param, line}`` (platform.openai.com/docs/api-reference/
batch, mirrored at learn.microsoft.com/azure/foundry/reference/rest/batches-create-batch);
the output line ``{id, custom_id, response: {status_code, request_id, body}, error}`` and
the line error codes ``batch_expired``, ``batch_cancelled``, ``request_timeout``
(openai-client-base BatchRequestOutput, BatchRequestOutputError); validation codes
``invalid_json_line`` ("This line is not parseable as valid JSON."), ``duplicate_custom_id``,
``url_mismatch``, ``model_mismatch``, ``empty_file``, ``too_many_tasks`` (stdapi-ai/stdapi.ai
issue 240; community.openai.com "Batch: The custom_id ... is a duplicate"). A rejected line
(4xx/5xx) goes to the error file with its error where the completion would be.

Status: ``validating`` → ``in_progress`` → ``finalizing`` → ``completed``; or ``failed``
(validation; ``errors`` says which line and why), ``expired`` (window ended; the lines not
answered are in the error file as ``batch_expired``), ``cancelling`` → ``cancelled``.
``request_counts.failed`` counts the lines bound for the error file, expired and
cancelled lines included once the batch has ended. Output lines come in an order unrelated
to the input's: match them by ``custom_id``.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from essaybench.core.hashing import sha256_hex
from essaybench.llm.fake.app import FakeState
from essaybench.llm.fake.batch_engine import BatchEngine
from essaybench.llm.fake.batch_input import parse_lines, parse_multipart, strict_json
from essaybench.llm.fake.batch_store import Batch, FileRecord, Item
from essaybench.llm.fake.protocol import auth_error

CHAT_ENDPOINT = "/v1/chat/completions"
_OPENAI_ENDPOINTS = {"/v1/responses", CHAT_ENDPOINT, "/v1/embeddings", "/v1/completions",
                     "/v1/moderations", "/v1/images/generations", "/v1/images/edits",
                     "/v1/videos"}


def _error(status: int, message: str, param: str | None = None,
           code: str | None = None) -> Response:
    etype = "invalid_request_error" if status < 500 else "server_error"
    body = {"error": {"message": message, "type": etype, "param": param, "code": code}}
    return Response(json.dumps(body), status, media_type="application/json")


def _json(payload: Any) -> Response:
    return Response(json.dumps(payload, ensure_ascii=False), media_type="application/json")


def _line(batch: Batch, item: Item) -> dict[str, Any]:
    h = sha256_hex(f"{batch.id}:{item.custom_id}")[:24]
    out: dict[str, Any] = {"id": f"batch_req_{h}", "custom_id": item.custom_id,
                           "response": None, "error": None}
    outcome = item.outcome
    if item.kind == "expired":
        out["error"] = {"code": "batch_expired", "message": "This request could not be "
                        "executed before the completion window expired."}
    elif item.kind == "canceled" or outcome is None:
        out["error"] = {"code": "batch_cancelled",
                        "message": "This request was not executed: the batch was cancelled."}
    elif outcome.status == 0:
        out["error"] = outcome.error
    else:
        out["response"] = {"status_code": outcome.status, "request_id": f"req_{h}",
                           "body": outcome.body}
    return out


class OpenAIBatches:
    def __init__(self, state: FakeState) -> None:
        self.state = state
        self.store = state.batch_store
        self.engine = BatchEngine(state)

    def _write_files(self, batch: Batch) -> None:
        done = sorted((i for i in batch.items if i.kind is not None),
                      key=lambda i: sha256_hex(f"{batch.id}:{i.custom_id}"))
        for kind, name in (("output", "output_file_id"), ("error", "error_file_id")):
            lines = [json.dumps(_line(batch, i), ensure_ascii=False) for i in done
                     if (i.kind == "succeeded") == (kind == "output")]
            if lines:
                data = ("\n".join(lines) + "\n").encode()
                batch.extra[name] = self.store.add_file(
                    f"{batch.id}_{kind}.jsonl", "batch_output", data, upload=False).id

    def batch_object(self, batch: Batch) -> dict[str, Any]:
        counts = batch.counts()
        status = batch.end if batch.phase == "ended" else batch.phase
        if status == "in_progress" and batch.cancel_requested.is_set():
            status = "cancelling"
        failed = counts["errored"] + (counts["expired"] + counts["canceled"]
                                      if batch.phase == "ended" else 0)
        stamp = {k: int(v) for k, v in batch.stamps.items()}
        return {
            "id": batch.id, "object": "batch", "endpoint": batch.extra["endpoint"],
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.extra["input_file_id"], "completion_window": "24h",
            "status": status, "output_file_id": batch.extra.get("output_file_id"),
            "error_file_id": batch.extra.get("error_file_id"),
            "created_at": int(batch.created_at), "expires_at": int(batch.expires_at),
            **{f"{k}_at": stamp.get(k) for k in ("in_progress", "finalizing", "completed",
                                                  "failed", "expired", "cancelling",
                                                  "cancelled")},
            "request_counts": {"total": len(batch.items), "completed": counts["succeeded"],
                               "failed": failed},
            "metadata": batch.extra.get("metadata"),
        }

    def _find(self, request: Request) -> Batch | Response:
        batch = self.store.batches.get(request.path_params["batch_id"])
        if batch is None or batch.protocol != "openai":
            return _error(404, f"No batch found with id '{request.path_params['batch_id']}'.",
                          code="not_found")
        return batch

    async def upload(self, request: Request) -> Response:
        limit = self.store.scenario.max_file_bytes
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit + 65_536:
                return _error(413, f"The file is larger than {limit} bytes.", "file")
        fields = parse_multipart(bytes(body), request.headers.get("content-type", ""))
        if isinstance(fields, str):
            return _error(400, fields)
        purpose, upload = fields.get("purpose"), fields.get("file")
        filename, data = upload or (None, b"")
        if filename is None:
            return _error(400, "Missing the 'file' field (a file part).", "file")
        if purpose is None or purpose[1] != b"batch":
            return _error(400, "The fake server accepts purpose 'batch' only.", "purpose")
        if not filename.endswith(".jsonl"):
            return _error(400, "Invalid file format for Batch API. Must be .jsonl", "file")
        if len(data) > limit:
            return _error(413, f"The file is larger than {limit} bytes.", "file")
        return _json(self._file_object(self.store.add_file(filename, "batch", data, upload=True)))

    def _file_object(self, record: FileRecord) -> dict[str, Any]:
        return {"id": record.id, "object": "file", "bytes": len(record.data),
                "created_at": record.created_at, "filename": record.filename,
                "purpose": record.purpose, "status": "processed", "expires_at": None,
                "status_details": None}

    async def file(self, request: Request) -> Response:
        record = self.store.files.get(request.path_params["file_id"])
        if record is None:
            return _error(404, f"No such File object: {request.path_params['file_id']}",
                          "id")
        if not request.url.path.endswith("/content"):
            return _json(self._file_object(record))
        if record.purpose == "batch_output":
            counters = self.store.counters
            counters.result_downloads += 1
            counters.results_served += record.data.count(b"\n")
        return Response(record.data, media_type="application/octet-stream")

    async def create(self, request: Request) -> Response:
        body = strict_json(await request.body())
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request (a JSON object).")
        endpoint, window = body.get("endpoint"), body.get("completion_window")
        if endpoint not in _OPENAI_ENDPOINTS:
            return _error(400, f"Invalid value for 'endpoint': {endpoint!r}.", "endpoint")
        if endpoint != CHAT_ENDPOINT:
            return _error(400, f"The fake server batches {CHAT_ENDPOINT} only.", "endpoint")
        if window != "24h":
            return _error(400, "Invalid value for 'completion_window': only '24h' is "
                               "supported.", "completion_window")
        metadata = body.get("metadata")
        if metadata is not None and not (isinstance(metadata, dict) and len(metadata) <= 16
                                         and all(isinstance(v, str) for v in metadata.values())):
            return _error(400, "metadata: at most 16 string values.", "metadata")
        file_id = body.get("input_file_id")
        record = self.store.files.get(file_id) if isinstance(file_id, str) else None
        if record is None:
            return _error(404, f"No such File object: {file_id}", "input_file_id")
        if record.purpose != "batch":
            return _error(400, f"File {file_id} was not uploaded with purpose 'batch'.",
                          "input_file_id")
        items, errors = parse_lines(record.data, CHAT_ENDPOINT, self.store.scenario.max_lines)
        if not errors and self.store.forced_failure():
            model = items[0].request["model"]
            items, errors = [], [{"code": "token_limit_exceeded", "message": "Enqueued token "
                                  f"limit reached for {model} in organization org-fake. "
                                  "Please try again once some in_progress batches have "
                                  "been completed.", "param": None, "line": None}]
        batch = self.store.create(f"batch_{uuid.uuid4().hex[:24]}", "openai", items,
                                  lambda item: self.engine.answer(item.request),
                                  self._write_files, errors, endpoint=endpoint,
                                  input_file_id=file_id, metadata=metadata)
        return _json(self.batch_object(batch))

    async def retrieve(self, request: Request) -> Response:
        batch = self._find(request)
        if isinstance(batch, Response):
            return batch
        response = _json(self.batch_object(batch))
        self.store.polled(batch)
        return response

    async def cancel(self, request: Request) -> Response:
        batch = self._find(request)
        if isinstance(batch, Response):
            return batch
        if not self.store.cancel(batch):
            return _error(400, f"Cannot cancel a batch with status '{batch.end}'.")
        return _json(self.batch_object(batch))

    async def list(self, request: Request) -> Response:
        try:
            limit = min(100, max(1, int(request.query_params.get("limit", "20"))))
        except ValueError:
            return _error(400, "limit must be an integer from 1 to 100.", "limit")
        ids = [b.id for b in reversed(self.store.batches.values()) if b.protocol == "openai"]
        after = request.query_params.get("after")
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        page = [self.batch_object(self.store.batches[i]) for i in ids[:limit]]
        return _json({"object": "list", "data": page, "has_more": len(ids) > limit,
                      "first_id": page[0]["id"] if page else None,
                      "last_id": page[-1]["id"] if page else None})

    def routes(self) -> tuple[BaseRoute, ...]:
        def guarded(handler: Any) -> Any:
            async def endpoint(request: Request) -> Response:
                denied = auth_error(self.state.expected_key, request.headers.get("authorization"))
                return denied if denied is not None else await handler(request)
            return endpoint

        return (Route("/v1/files", guarded(self.upload), methods=["POST"]),
                Route("/v1/files/{file_id}", guarded(self.file), methods=["GET"]),
                Route("/v1/files/{file_id}/content", guarded(self.file), methods=["GET"]),
                Route("/v1/batches", guarded(self.create), methods=["POST"]),
                Route("/v1/batches", guarded(self.list), methods=["GET"]),
                Route("/v1/batches/{batch_id}", guarded(self.retrieve), methods=["GET"]),
                Route("/v1/batches/{batch_id}/cancel", guarded(self.cancel), methods=["POST"]))
