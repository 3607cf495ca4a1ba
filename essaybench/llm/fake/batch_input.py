"""What a client uploads to the fake's OpenAI Batch API, read strictly: a multipart/form-data
body (stdlib only: the fake does not depend on python-multipart) and the JSONL input file.

Untrusted input: every problem is a message or a validation error naming the line, in
OpenAI's shape ``{code, message, param, line}``; nothing here raises on bad bytes.
"""

from __future__ import annotations

import json
import re
from typing import Any

from essaybench.llm.fake.batch_store import Item

_DISPOSITION = re.compile(r'(\w+)="([^"]*)"')
_MAX_ERRORS = 100


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def strict_json(raw: bytes | str) -> Any:
    """The JSON value of ``raw``, or None when it is not strict JSON (NaN, bad UTF-8, depth)."""
    try:
        return json.loads(raw, parse_constant=_no_constants)
    except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError too
        return None


def parse_multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]] | str:
    """multipart/form-data fields: name -> (filename, bytes); or why the body is not one."""
    mime, _, params = content_type.partition(";")
    if mime.strip().lower() != "multipart/form-data":
        return "The request must be multipart/form-data (fields: file, purpose)."
    boundary = next((v.strip().strip('"') for k, _, v in
                     (p.strip().partition("=") for p in params.split(";"))
                     if k.strip().lower() == "boundary"), "")
    if not boundary:
        return "The multipart/form-data body has no boundary."
    parts = body.split(b"--" + boundary.encode("latin-1"))
    if len(parts) < 3 or not parts[-1].startswith(b"--"):
        return "The multipart/form-data body is malformed."
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in parts[1:-1]:
        head, sep, data = part.removeprefix(b"\r\n").partition(b"\r\n\r\n")
        if not sep or not data.endswith(b"\r\n"):
            return "The multipart/form-data body is malformed."
        disposition = next((h.partition(":")[2] for h in head.decode("latin-1").split("\r\n")
                            if h.lower().startswith("content-disposition:")), "")
        attrs = dict(_DISPOSITION.findall(disposition))
        if "name" not in attrs:
            return "A multipart part has no name."
        fields[attrs["name"]] = (attrs.get("filename"), data[:-2])
    return fields


def parse_lines(data: bytes, endpoint: str, max_lines: int
                ) -> tuple[list[Item], list[dict[str, Any]]]:
    """The input file's lines as items, or the validation errors that fail the batch."""
    errors: list[dict[str, Any]] = []
    items: list[Item] = []
    seen: set[str] = set()
    model: str | None = None

    def bad(line: int, code: str, message: str, param: str | None = None) -> None:
        errors.append({"code": code, "message": message, "param": param, "line": line})

    lines = data.split(b"\n")
    if lines and not lines[-1].strip():
        lines.pop()  # the final newline
    if not lines:
        return [], [{"code": "empty_file", "message": "The batch input file is empty.",
                     "param": None, "line": None}]
    if len(lines) > max_lines:
        return [], [{"code": "too_many_tasks", "message": f"The batch input file has "
                     f"{len(lines)} requests; at most {max_lines} are allowed.",
                     "param": None, "line": None}]
    for n, raw in enumerate(lines, 1):
        obj = strict_json(raw)
        if not isinstance(obj, dict):
            bad(n, "invalid_json_line", "This line is not parseable as valid JSON.")
            continue
        custom_id, body = obj.get("custom_id"), obj.get("body")
        if not isinstance(custom_id, str) or not custom_id:
            bad(n, "missing_required_parameter", "Missing custom_id (a non-empty string).",
                "custom_id")
        elif custom_id in seen:
            bad(n, "duplicate_custom_id", "The custom_id for this request is a duplicate of "
                "another request. The custom_id parameter must be unique for each request "
                "in a batch.", "custom_id")
        elif obj.get("method") != "POST":
            bad(n, "invalid_method", "The method must be POST.", "method")
        elif obj.get("url") != endpoint:
            bad(n, "url_mismatch", "The URL provided for this request does not match the "
                f"batch endpoint {endpoint}.", "url")
        elif not isinstance(body, dict) or not isinstance(body.get("model"), str):
            bad(n, "missing_required_parameter", "The body must be an object with a model.",
                "body.model")
        elif model is not None and body["model"] != model:
            bad(n, "model_mismatch", "The provided model was not the same as the model of "
                "other requests in this batch: one model per batch.", "body.model")
        else:
            model = model or body["model"]
            items.append(Item(custom_id, body))
        if isinstance(custom_id, str):
            seen.add(custom_id)
    return (items, []) if not errors else ([], errors[:_MAX_ERRORS])
