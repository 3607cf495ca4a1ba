"""Strict YAML for configuration: a repeated key is an error, never a silent override."""

from __future__ import annotations

from typing import IO, Any

import yaml


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses repeated keys: PyYAML would keep the last one silently."""


def _mapping_without_duplicates(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate entry {key!r}", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _mapping_without_duplicates)


def load_strict(stream: str | IO[str]) -> Any:
    """Parse YAML safely; raises ``yaml.YAMLError`` (with a position) on a repeated key."""
    return yaml.load(stream, Loader=_UniqueKeyLoader)
