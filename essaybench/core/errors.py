"""What counts as the user's mistake, as opposed to a bug or a failed run.

A wrong config or input file, an option naming what does not exist (a run, a snapshot, a
prompt set), a missing key variable or a store another process holds: the user can fix
each, and needs one line saying what and where, not a traceback (DESIGN.md, rule 13).
Library errors of that kind subclass ``UserError`` beside their built-in base (a
``YamlConfigError`` is still a ``ValueError``), so callers keep catching what they caught
and the command line tells them apart from bugs in one place (``essaybench.cli.errors``).
"""

from __future__ import annotations


class UserError(Exception):
    """A mistake the user can fix; the message names what is wrong and where."""


class NotFoundError(UserError, LookupError):
    """What the user named (a run, a stage's snapshot, a prompt set) is not in the store."""


class UnknownNameError(UserError, KeyError):
    """A name or id the user gave (a model in a config, a snapshot id) is not defined.

    A ``KeyError`` for the callers that look names up, with its message as text (a plain
    ``KeyError`` prints the repr of its argument)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def user_error_of(exc: BaseException) -> UserError | None:
    """``exc`` when it is a ``UserError``, else the nearest ``UserError`` it was raised
    from (``raise ... from``); None when there is none. (Not one it was raised while
    handling: a bug in an ``except`` clause is still a bug.)"""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, UserError):
            return current
        seen.add(id(current))
        current = current.__cause__
    return None
