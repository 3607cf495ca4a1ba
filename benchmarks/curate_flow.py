"""Wall time of the whole ``curate`` flow on the bundled sample, Prefect start-up included.

Each repeat is a fresh process (``essaybench curate``) with a fresh Prefect home and
store, as a newcomer's first run would be. Target: ≤ 60 s on this 2-core machine.

    python benchmarks/curate_flow.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 60.0


def one_run(essaybench: str) -> float:
    tmp = Path(tempfile.mkdtemp(prefix="eb-bench-"))
    env = {**os.environ, "PREFECT_HOME": str(tmp / "prefect"), "DO_NOT_TRACK": "1",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
    try:
        t0 = time.perf_counter()
        subprocess.run([essaybench, "curate", "--store", str(tmp / "store")], env=env,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    essaybench = shutil.which("essaybench") or str(Path(sys.executable).parent / "essaybench")
    times = [one_run(essaybench) for _ in range(args.repeats)]
    med = statistics.median(times)
    verdict = "PASS" if med <= TARGET_S else "FAIL"
    print(f"curate flow on bundled sample: runs {', '.join(f'{t:.1f}' for t in times)} s; "
          f"median {med:.1f} s (target ≤ {TARGET_S:.0f} s): {verdict}")


if __name__ == "__main__":
    main()
