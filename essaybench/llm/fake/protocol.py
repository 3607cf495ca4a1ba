"""The OpenAI chat-completions wire format as the fake server speaks it.

Token counts follow one documented rule (:func:`count_tokens`), not a real tokenizer.
"""

from __future__ import annotations

import hmac
import json
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

# Runs, not single characters: Chinese text is mostly one long run, so findall makes a few
# strings per text instead of one per character.
_CJK_RUNS = re.compile("[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef"
                       "\U00020000-\U0002ffff]+")
_ERROR_DEFAULTS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", "permission_denied", "You are not allowed to use this model."),
    404: ("invalid_request_error", "model_not_found",
          "The model does not exist or you do not have access to it."),
    408: ("timeout", None, "Request timed out."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request."),
    502: ("server_error", None, "Bad gateway."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
    504: ("server_error", None, "Gateway timeout."),
}
DEFAULT_CODE = object()  # "use the default error code for this status"


def count_tokens(text: str) -> int:
    """CJK characters at 1.6 per token, anything else at 4 characters per token, rounded up."""
    cjk = sum(map(len, _CJK_RUNS.findall(text)))
    return math.ceil(cjk / 1.6) + math.ceil((len(text) - cjk) / 4)


def cut_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` within ``limit`` tokens (token count grows with length)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count_tokens(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def error_response(status: int, message: str | None = None, code: Any = DEFAULT_CODE,
                   retry_after: float | None = None) -> Response:
    """An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}."""
    etype, default_code, default_message = _ERROR_DEFAULTS.get(
        status, ("invalid_request_error", None, "Error."))
    body = {"error": {"message": message or default_message, "type": etype, "param": None,
                      "code": default_code if code is DEFAULT_CODE else code}}
    headers = {}
    if retry_after is not None:
        headers["retry-after"] = f"{retry_after:g}"
        headers["retry-after-ms"] = str(round(retry_after * 1000))
    return Response(json.dumps(body), status, headers, media_type="application/json")


@dataclass(frozen=True)
class ChatFields:
    model: str
    prompt: str  # text of the last user message
    prompt_tokens: int
    max_tokens: int | None
    structured: bool
    schema: dict[str, Any] | None
    first_prompt: str = ""  # text of the first user message (stays put across re-asks)
    system_tokens: int = 0  # of prompt_tokens, the leading system messages' (framing included)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def parse_chat(body: Any) -> ChatFields | str:
    """The fields the fake needs, or a message saying why the body is not a chat request."""
    if not isinstance(body, dict):
        return "The request body must be a JSON object."
    model, messages = body.get("model"), body.get("messages")
    if not isinstance(model, str) or not model:
        return "you must provide a model parameter"
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return "'messages' must be a non-empty array of objects with a 'role'."
    if body.get("stream"):
        return "The fake server does not stream."
    if body.get("n") not in (None, 1):
        return "The fake server returns exactly one choice (n=1)."
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None and (not isinstance(limit, int) or limit < 1):
        return "max_tokens must be a positive integer."
    texts = [_text_of(m.get("content")) for m in messages]
    users = [t for m, t in zip(messages, texts, strict=True) if m["role"] == "user"]
    fmt = body.get("response_format")
    structured, schema = False, None
    if isinstance(fmt, dict) and fmt.get("type") in ("json_object", "json_schema"):
        structured = True
        # OpenAI nests the schema under json_schema.schema; llama.cpp puts it beside the type.
        spec = fmt.get("json_schema") if fmt["type"] == "json_schema" else fmt
        found = spec.get("schema") if isinstance(spec, dict) else None
        schema = found if isinstance(found, dict) else None
    # Prompt tokens: each message's text plus 4 for its framing, plus 3 to prime the reply.
    framed = [count_tokens(t) + 4 for t in texts]
    leading = next((i for i, m in enumerate(messages) if m["role"] != "system"), len(messages))
    return ChatFields(model=model, prompt=users[-1] if users else texts[-1],
                      first_prompt=users[0] if users else texts[-1],
                      prompt_tokens=sum(framed) + 3, system_tokens=sum(framed[:leading]),
                      max_tokens=limit, structured=structured, schema=schema)


def completion_body(chat: ChatFields, returned_model: str, response_id: str, content: str,
                    finish: str, usage_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """A chat.completion object; usage counted with :func:`count_tokens`, plus
    ``usage_extra``'s fields (cached input: fake/usage.py)."""
    completion_tokens = count_tokens(content)
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": returned_model,
        "system_fingerprint": "fp_essaybench_fake",
        "choices": [{"index": 0, "finish_reason": finish, "logprobs": None,
                     "message": {"role": "assistant", "content": content, "refusal": None}}],
        "usage": {"prompt_tokens": chat.prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": chat.prompt_tokens + completion_tokens,
                  **(usage_extra or {})},
    }


def bearer_token(header: str | None) -> str | None:
    """The token of an "Authorization: Bearer <token>" header, else None."""
    scheme, _, token = (header or "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def auth_error(expected: str | None, header: str | None) -> Response | None:
    """A 401 unless the Authorization header carries the expected bearer key (if one is set)."""
    if expected is None:
        return None
    if not header:
        return error_response(401, "You didn't provide an API key (Authorization: Bearer).",
                              code="missing_api_key")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                             expected.encode()):
        return error_response(401)  # never echo the key, not even masked
    return None
