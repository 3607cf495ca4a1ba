"""``POST /v1/embeddings`` of the fake server: a deterministic embedding per input.

Each text's vector is its hashed character-bigram counts (``DIM`` buckets by sha256),
L2-normalised: texts sharing many bigrams are close, unrelated texts nearly orthogonal —
enough for tests of code that compares embeddings, with no model. Any model name is
served; usage counts one token per character.
"""

from __future__ import annotations

import hashlib
import json
import math

from starlette.requests import Request
from starlette.responses import Response

DIM = 256
PATH = "/v1/embeddings"


def fake_embedding(text: str, dim: int = DIM) -> list[float]:
    vec = [0.0] * dim
    chars = "".join(c for c in text if not c.isspace())
    for i in range(len(chars) - 1):
        digest = hashlib.sha256(chars[i:i + 2].encode("utf-8")).digest()
        vec[int.from_bytes(digest[:4], "big") % dim] += 1.0
    norm = math.sqrt(sum(v * v for v in vec))
    return [v / norm for v in vec] if norm else vec


def _error(status: int, message: str) -> Response:
    return Response(json.dumps({"error": {"message": message, "type": "invalid_request_error"}}),
                    status_code=status, media_type="application/json")


async def embeddings(request: Request) -> Response:
    try:
        body = json.loads(await request.body())
    except ValueError:
        return _error(400, "body is not JSON")
    inputs = body.get("input") if isinstance(body, dict) else None
    if isinstance(inputs, str):
        inputs = [inputs]
    if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
        return _error(400, "'input' must be a string or a list of strings")
    data = [{"object": "embedding", "index": i, "embedding": fake_embedding(t)}
            for i, t in enumerate(inputs)]
    tokens = sum(len(t) for t in inputs)
    return Response(json.dumps({"object": "list", "model": str(body.get("model", "")),
                                "data": data,
                                "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}),
                    media_type="application/json")
