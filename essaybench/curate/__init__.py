"""Curation: raw writing requests to a versioned essay prompt set.

Stages, in order: collect → filter → dedup → rouge → classify. Each stage is
a pure function from the kept rows of its upstream snapshot to a
:class:`~essaybench.core.contracts.StageOutput` that holds *every* input row with
its decision, so the funnel always balances. The stages that read and write the
store are in :mod:`essaybench.stages`.
"""
