"""The judge: what it is asked (``request``, ``render``), how its reply is read
(``parse``), the judgments table (``judgments``), and judging while generating
(``prefetch``).
"""
