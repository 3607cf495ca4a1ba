"""Across runs, read from the store: a run's lineage and reuse scope (``lineage``), its
health verdict (``health``), the cost and time estimate before it starts (``estimate``),
and the comparison with an earlier run (``compare``). Stages and flows use these; they
use no stage.
"""
