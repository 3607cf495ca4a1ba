"""Weekly human spot checks (issue 27 item 5): pick essays, hand out a blind pack, read it
back, track judge–human agreement per week, promote accepted items to a gold set.

* :mod:`.sample` — seeded selection stratified by model × genre, flagged, judge-disagreement
  and borderline essays first.
* :mod:`.pack` — the blind pack: pseudonymous item and writer ids, a CSV and an offline HTML
  form (no judge score, no model name); the key that maps ids back stays in the store.
* :mod:`.importer` — a filled pack validated (one line per bad cell) and mapped back, then
  checked against the run as every absolute annotation file is
  (:func:`essaybench.human.run_check.check_against_run`); agreement per import.
* :mod:`.gold` — accepted items promoted into the next gold-set version.

No Prefect; every random choice takes a seed.
"""
