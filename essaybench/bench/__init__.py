"""The benchmark's pure domain: the config, generation requests, the judge (``judge/``:
request, render, parse, judgments), pairwise judging (``pairwise/``: design, prompt,
run, tables), scoring, aggregation (Table 5), compliance, comparisons and the tables of
the stats and agreement stages. No store, no Prefect: stages call it.
"""
