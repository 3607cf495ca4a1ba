"""JSON Lines read with line numbers, for files where a bad line stops the load.

(The chat-log source reader is different: it quarantines a bad line with its reason and
goes on; see ``sources.readers``.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def numbered_json_lines(path: Path, error: type[Exception]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line; ``error`` names
    ``path:line`` and the parser's reason for a line that is not JSON."""
    with path.open(encoding="utf-8") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                yield number, json.loads(text)
            except json.JSONDecodeError as exc:
                raise error(f"{path}:{number}: not valid JSON: {exc.msg}") from exc
