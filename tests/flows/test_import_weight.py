"""What a benchmark run's process carries before it does anything (issue 25 item 7: the
pipeline's peak memory). The pipeline flow imports every stage's module; the libraries
only curation and human-label statistics use (scikit-learn, statsmodels and the pandas they
pull in, ~100 MiB of RSS together) are imported where those run, so a run that does not
curate and has no human labels never loads them. jieba's part-of-speech tagger (its tables:
~0.8 s, curation's name search) and matplotlib (~0.8 s, the report's charts) are imported
where they are used: every flow-run process (a worker's run, each shard) imports the
flow module before it does anything."""

from __future__ import annotations

import subprocess
import sys

UNUSED_BY_A_RUN = ("sklearn", "statsmodels", "pandas", "jieba.posseg", "matplotlib")


def test_importing_the_pipeline_flow_leaves_the_curation_and_human_libraries_unloaded() -> None:
    probe = ("import sys\n"
             "import essaybench.flows.pipeline, essaybench.cli\n"
             f"print([m for m in {UNUSED_BY_A_RUN!r} if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout

