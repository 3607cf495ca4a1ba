"""Write reviewers' decisions into the override file, keeping everything else in it.

The file is edited, not regenerated: its comments (the shipped one explains the format),
key order and other entries stay as they were (ruamel.yaml's round trip). A decision for
a prompt that already has an entry replaces the labels it gives and keeps the others
(deciding the genre of an entry that fixed the set keeps the set). The result is
validated as an override file before anything is written, and written atomically (a
temporary file beside it, fsynced, then a rename: ``core.files``), so a failed write never
leaves half a file, and the file keeps its permission bits.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from essaybench.core.files import write_atomically
from essaybench.curate.overrides import (
    OverrideEntry,
    OverrideFile,
    OverrideFileError,
    load_overrides,
)

NEW_FILE_HEADER = (
    "Manual-review overrides for the classify stage (essaybench/curate/overrides.py documents\n"
    "the format); written by `essaybench curate review`. A reviewer's label wins over the\n"
    'rules and the LLM, and its source is recorded as "manual".')


def _round_trip() -> YAML:
    yaml = YAML()  # round-trip: comments and order survive
    yaml.width = 4096  # one line per value, as a reviewer wrote it
    yaml.allow_unicode = True
    return yaml


def _load(path: Path) -> CommentedMap:
    if not path.exists():
        doc = CommentedMap()
        doc.yaml_set_start_comment(NEW_FILE_HEADER)
        doc["version"] = 1
        doc["overrides"] = CommentedMap()
        return doc
    load_overrides(path)  # an invalid file is reported as such, before anything is changed
    try:
        data = _round_trip().load(path.read_text(encoding="utf-8"))
    except (OSError, YAMLError) as exc:
        raise OverrideFileError(f"{path}: override file: cannot read: {exc}") from None
    if data is None:
        data = CommentedMap()
    if data.get("overrides") is None:
        data["overrides"] = CommentedMap()
    data.setdefault("version", 1)
    return data  # type: ignore[no-any-return]


_GENRE_KEYS = ("genre", "allowed_genres", "not_essay")


def _merge(current: Any, decision: OverrideEntry) -> CommentedMap:
    merged = current if isinstance(current, CommentedMap) else CommentedMap()
    # A genre decision replaces the entry's earlier one of any kind (a genre, a choice, not
    # an essay); not an essay also drops the set, and a set decision revives an essay.
    dropped: tuple[str, ...] = ()
    if decision.not_essay:
        dropped = (*_GENRE_KEYS, "prompt_set")
    elif decision.decides_genre:
        dropped = _GENRE_KEYS
    elif decision.prompt_set is not None:
        dropped = ("not_essay",)
    for key in dropped:
        merged.pop(key, None)
    for field in ("genre", "allowed_genres", "not_essay", "prompt_set", "note", "reviewer"):
        value = getattr(decision, field)
        if value is not None and value is not False:
            merged[field] = list(value) if isinstance(value, tuple) else getattr(
                value, "value", value)
    return merged


def write_decisions(path: Path, decisions: Mapping[str, OverrideEntry]) -> dict[str, OverrideEntry]:
    """Add ``decisions`` (by prompt_id) to the override file at ``path`` (created if
    absent); the file's entries afterwards. OverrideFileError for an invalid existing file
    or one that cannot be written, naming the file."""
    doc = _load(path)
    overrides = doc["overrides"]
    for prompt_id, decision in decisions.items():
        overrides[prompt_id] = _merge(overrides.get(prompt_id), decision)
    OverrideFile.model_validate(_plain(doc))  # never write what the next curate would reject
    out = io.StringIO()
    _round_trip().dump(doc, out)
    _write_atomically(path, out.getvalue())
    return load_overrides(path)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def _write_atomically(path: Path, text: str) -> None:
    """The file replaced whole, keeping its permission bits; OSError as one line."""
    try:
        write_atomically(path, text.encode("utf-8"), keep_mode=True)
    except OSError as exc:
        raise OverrideFileError(f"cannot write override file {path}: "
                                f"{exc.strerror or exc}") from None
