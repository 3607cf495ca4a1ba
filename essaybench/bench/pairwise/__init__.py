"""Pairwise judging: which essays meet (``design``), the prompt (``prompt``), the calls
and verdicts (``run``), and the per-order and merged tables (``tables``).
"""
