"""What a benchmark run's process carries before it does anything (issue 25 item 7: the
pipeline's peak memory). The pipeline flow imports every stage's module; the libraries
only curation and human-label statistics use (scikit-learn, statsmodels and the pandas they
pull in, ~100 MiB of RSS together) are imported where those run, so a run that does not
curate and has no human labels never loads them."""

from __future__ import annotations

import subprocess
import sys

UNUSED_BY_A_RUN = ("sklearn", "statsmodels", "pandas")


def test_importing_the_pipeline_flow_leaves_the_curation_and_human_libraries_unloaded() -> None:
    probe = ("import sys\n"
             "import essaybench.flows.pipeline, essaybench.cli\n"
             f"print([m for m in {UNUSED_BY_A_RUN!r} if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "[]", done.stdout

