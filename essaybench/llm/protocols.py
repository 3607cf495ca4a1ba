"""Protocol names and the backend classes registered under them (the bookkeeping of
``llm.backends``, apart so the registry can check an entry's ``protocol`` without
importing the backends' types).

Built-in protocols are imported when first asked for; installed packages offer more
through the entry-point group ``essaybench.backends``, loaded only when a registry names
a protocol no class was registered under."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points

__all__ = ["DEFAULT_PROTOCOL", "ENTRY_POINT_GROUP", "UnknownProtocolError",
           "is_known_protocol", "known_protocols", "lookup", "register"]

ENTRY_POINT_GROUP = "essaybench.backends"
DEFAULT_PROTOCOL = "openai"
# Built-in protocols: the module that registers each one's class when imported.
_BUILTIN = {"openai": "essaybench.llm.client"}
_REGISTERED: dict[str, object] = {}


class UnknownProtocolError(LookupError):
    """No backend class is registered under a protocol name."""


def register(name: str, cls: object) -> None:
    """Send entries with ``protocol: <name>`` through ``cls``; a name registered again is
    replaced."""
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"backend protocol names are letters, digits, '-' and '_': {name!r}")
    _REGISTERED[name] = cls


def known_protocols() -> list[str]:
    """Every protocol name a registry entry may give: built in, registered, or offered
    by an installed package's entry point."""
    offered = {point.name for point in entry_points(group=ENTRY_POINT_GROUP)}
    return sorted({*_BUILTIN, *_REGISTERED, *offered})


def is_known_protocol(name: str) -> bool:
    """Whether ``lookup(name)`` would find a class (without loading one)."""
    return (name in _REGISTERED or name in _BUILTIN
            or any(True for _ in entry_points(group=ENTRY_POINT_GROUP, name=name)))


def lookup(name: str) -> object:
    """The class registered under protocol ``name``."""
    cls = _REGISTERED.get(name)
    if cls is not None:
        return cls
    if name in _BUILTIN:
        import_module(_BUILTIN[name])
        return _REGISTERED[name]
    for point in entry_points(group=ENTRY_POINT_GROUP, name=name):
        return _REGISTERED.setdefault(name, point.load())
    raise UnknownProtocolError(f"no backend for protocol {name!r}; known: "
                               f"{', '.join(known_protocols())}")
