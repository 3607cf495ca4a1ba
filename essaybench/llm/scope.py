"""Which recorded calls a batch may be served: the reuse scope of a run.

The ledger's key is a hash of the request alone, so without a scope every successful
call ever made would be served again: next week's run would replay this week's. A
scope names the run that pays for new calls (recorded on every ledger row) and the runs
whose calls may be served instead of sent: the run itself, and for a rerun the run it
continues and that run's own scope (see ``essaybench.runs.lineage``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ReuseScope:
    """``run_id``: recorded on the rows of new calls (None: no run, e.g. a test or a
    script). ``runs``: the runs whose calls may be served; None means any recorded call
    (no run scoping: the behaviour of a bare gateway, and of curation's labeller).
    ``unattributed``: with ``runs``, also serve calls recorded before rows carried a run
    id (NULL): asked for only by a rerun of such an old run."""

    run_id: str | None = None
    runs: frozenset[str] | None = None
    unattributed: bool = False

    @classmethod
    def of_run(cls, run_id: str, lenders: Iterable[str] = (),
               unattributed: bool = False) -> ReuseScope:
        """The scope of ``run_id``: its own calls and those of ``lenders``."""
        return cls(run_id, frozenset({run_id, *lenders}), unattributed)

    def allows(self, paid_by: str | None) -> bool:
        """May a call recorded under run ``paid_by`` be served in this scope?"""
        if self.runs is None:
            return True
        return self.unattributed if paid_by is None else paid_by in self.runs

    def sql_params(self) -> dict[str, Any]:
        """The parameters the ledger's look-ups filter on (see sql/ledger_lookup_*.sql)."""
        return {"any_run": self.runs is None, "runs": sorted(self.runs or ()),
                "unattributed": self.unattributed}


ANY_RUN = ReuseScope()
