"""Strict YAML for configuration files, read by path so every error names the file.

Every config, rubric and settings reader goes through :func:`read_yaml` (or its two
shorthands :func:`load_yaml` and :func:`load_model`). A repeated key is an error, never a
silent override, and each mistake becomes one line a user can jump to::

    configs/benchmark.yaml:12:3: benchmark config: duplicate key 'judge' (first at line 4)
    configs/benchmark.yaml:14: benchmark config: judge.temperature: Input should be ...

A validation error carries the line of the offending field, found by walking the composed
YAML node tree along pydantic's error location. Readers with their own error class (a
subclass of :class:`YamlConfigError`) pass it as ``error=`` so callers keep catching it.
A ``.json`` path is read with the json module, with repeated keys rejected the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from essaybench.core.errors import UserError

Loc = tuple[int | str, ...]
# Turns one pydantic error (its location and message) into the text after "what: ".
Describe = Callable[[Loc, str], str]
M = TypeVar("M", bound=BaseModel)
_WHOLE: Any = object()  # "validate the document's own data"


class YamlConfigError(UserError, ValueError):
    """A config file that cannot be read, parsed or validated; the message names the file.

    Also built with a plain message by readers whose subclasses report other mistakes.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 column: int | None = None) -> None:
        super().__init__(message)
        self.path, self.line, self.column = path, line, column


def _where(path: Path, line: int | None = None, column: int | None = None) -> str:
    return ":".join(str(p) for p in (path, line, column) if p is not None)


# --- parsing --------------------------------------------------------------------------


class _DuplicateKeyError(yaml.constructor.ConstructorError):
    """A repeated key: reported as such, not as a YAML syntax error."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses repeated keys: PyYAML would keep the last one silently."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> Any:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        try:
            first = seen.get(key)
        except TypeError:  # unhashable key: construct_mapping reports it with a position
            continue
        if first is not None:
            was, now = first.start_mark, key_node.start_mark
            at = (f"line {was.line + 1}" if was.line != now.line else f"column {was.column + 1}")
            raise _DuplicateKeyError(None, None, f"duplicate key {key!r} (first at {at})", now)
        seen[key] = key_node
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _mapping_without_duplicates)


def _parse_yaml(text: str) -> tuple[Any, yaml.Node | None]:
    # Compose, then construct from the same nodes: one parse yields both the data and the
    # positions that validation errors are located by.
    loader = _UniqueKeyLoader(text)
    try:
        root = loader.get_single_node()
        return (loader.construct_document(root) if root is not None else None), root
    finally:
        loader.dispose()


def _no_duplicate_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKeyError(None, None, f"duplicate key {key!r}", None)
        out[key] = value
    return out


def _yaml_problem(exc: yaml.YAMLError, text: str) -> tuple[str, int | None, int | None]:
    """The problem and its 1-based line and column, without PyYAML's quoted source snippet
    (the offending line may hold a secret pasted into a config)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (None, None)
        if isinstance(exc, _DuplicateKeyError):
            return str(exc.problem), line, col
        problem = exc.problem or "unexpected content"
        context = f" ({exc.context})" if exc.context else ""
        return f"not valid YAML: {problem}{context}", line, col
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1
        return f"not valid YAML: unacceptable character #x{exc.character:04x}", line, None
    return "not valid YAML", None, None


# --- the document ---------------------------------------------------------------------


def _mark_at(root: yaml.Node | None, loc: Loc) -> yaml.Mark | None:
    """Where the deepest part of ``loc`` present in the file starts (a key's own line)."""
    if root is None:
        return None
    node, mark = root, root.start_mark
    for step in loc:
        if isinstance(node, yaml.MappingNode):
            found = next(((k, v) for k, v in node.value
                          if isinstance(k, yaml.ScalarNode) and k.value == str(step)), None)
            if found is None:
                break
            mark, node = found[0].start_mark, found[1]
        elif (isinstance(node, yaml.SequenceNode) and isinstance(step, int)
              and 0 <= step < len(node.value)):
            node = node.value[step]
            mark = node.start_mark
        else:
            break
    return mark


def _label(data: Any, loc: Loc, prefix: str = "") -> str:
    """A pydantic location as a readable path, list items named by their ``id`` if any:
    ``genres.narrative.traits[nar.plot].depth``."""
    path, node = prefix, data
    for step in loc:
        if isinstance(step, int) and isinstance(node, list) and 0 <= step < len(node):
            node = node[step]
            label = node.get("id") if isinstance(node, dict) else None
            path += f"[{label}]" if isinstance(label, str) and label else f"[{step}]"
        else:
            path += f".{step}" if path else str(step)
            node = node.get(step) if isinstance(node, dict) else None
    return path


@dataclass(frozen=True)
class YamlDocument:
    """A parsed file: its data plus the node tree that locates errors in it."""

    path: Path
    what: str
    data: Any
    root: yaml.Node | None
    error: type[YamlConfigError] = YamlConfigError

    def fail(self, problem: str, at: Loc = ()) -> YamlConfigError:
        """An error (to raise) at the line of ``at``, e.g. ``("models", "gpt-x")``."""
        mark = _mark_at(self.root, at)
        line = mark.line + 1 if mark is not None else None
        return self.error(f"{_where(self.path, line)}: {self.what}: {problem}",
                          path=str(self.path), line=line)

    def validate(self, model_cls: type[M], data: Any = _WHOLE, *, at: Loc = (),
                 describe: Describe | None = None) -> M:
        """``model_cls.model_validate(data)``, the document's data unless given; ``at``
        says where in the file ``data`` sits. One line per problem, each with its line."""
        value = self.data if data is _WHOLE else data
        try:
            return model_cls.model_validate(value)
        except ValidationError as exc:
            # from None: pydantic's own text echoes input values, which may be secrets
            raise self._invalid(exc, value, at, describe) from None

    def _invalid(self, exc: ValidationError, value: Any, at: Loc,
                 describe: Describe | None) -> YamlConfigError:
        lines, first = [], None
        for err in exc.errors(include_url=False, include_context=False, include_input=False):
            loc: Loc = tuple(err["loc"])
            mark = _mark_at(self.root, at + loc)
            line = mark.line + 1 if mark is not None else None
            first = first if first is not None else line
            text = (describe(at + loc, err["msg"]) if describe is not None else
                    f"{_label(value, loc, _label(self.data, at)) or '(top level)'}: {err['msg']}")
            lines.append(f"{_where(self.path, line)}: {self.what}: {text}")
        return self.error("\n".join(lines), path=str(self.path), line=first)


def _parse(raw: bytes, path: Path, what: str,
           error: type[YamlConfigError]) -> tuple[Any, yaml.Node | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = raw.count(b"\n", 0, exc.start) + 1
        raise error(f"{_where(path, at)}: {what}: not UTF-8 text", path=str(path),
                    line=at) from None
    try:
        if path.suffix == ".json":
            return json.loads(text, object_pairs_hook=_no_duplicate_pairs), None
        return _parse_yaml(text)
    except json.JSONDecodeError as exc:
        raise error(f"{_where(path, exc.lineno, exc.colno)}: {what}: not valid JSON: {exc.msg}",
                    path=str(path), line=exc.lineno, column=exc.colno) from None
    except yaml.YAMLError as exc:
        problem, line, col = _yaml_problem(exc, text)
        raise error(f"{_where(path, line, col)}: {what}: {problem}", path=str(path),
                    line=line, column=col) from None


def read_config_bytes(path: Path | str, what: str, *,
                      error: type[YamlConfigError] = YamlConfigError) -> bytes:
    """The file's bytes, or ``error`` naming the file: for a caller that hashes them
    before handing them to :func:`read_yaml` as ``content``."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise error(f"{path}: {what}: not found", path=str(path)) from None
    except OSError as exc:
        raise error(f"{path}: {what}: cannot read: {exc.strerror or exc}",
                    path=str(path)) from None


def read_yaml(path: Path | str, what: str, *, mapping: bool = True,
              content: bytes | None = None,
              error: type[YamlConfigError] = YamlConfigError) -> YamlDocument:
    """Read and strictly parse ``path`` (``what`` names it in messages: "sources config").

    ``mapping``: the top level must be a mapping (an empty file reads as ``{}``).
    ``content``: the file's bytes when the caller already read them (to hash exactly
    what is parsed). Raises ``error`` for a missing, unreadable or malformed file.
    """
    path = Path(path)
    raw = read_config_bytes(path, what, error=error) if content is None else content
    data, root = _parse(raw, path, what, error)
    doc = YamlDocument(path, what, {} if mapping and data is None else data, root, error)
    if mapping and not isinstance(doc.data, dict):
        raise doc.fail(f"expected a mapping at the top level, found {type(doc.data).__name__}")
    return doc


def load_yaml(path: Path | str, what: str, *, mapping: bool = False,
              error: type[YamlConfigError] = YamlConfigError) -> Any:
    """The parsed content of ``path``; see :func:`read_yaml`."""
    return read_yaml(path, what, mapping=mapping, error=error).data


def load_model(model_cls: type[M], path: Path | str, what: str, *,
               error: type[YamlConfigError] = YamlConfigError) -> M:
    """Read ``path`` and validate it as ``model_cls``; every error names file and line."""
    return read_yaml(path, what, error=error).validate(model_cls)
