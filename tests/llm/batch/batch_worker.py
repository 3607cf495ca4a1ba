"""A batch run in its own process, stopped at a named step so a test can SIGKILL it there.

    python -m tests.llm.batch.batch_worker LEDGER URL PROTOCOL N STEP
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from essaybench.llm.batch import BatchOptions, BatchRunner
from essaybench.llm.fake.server import FakeServerHandle
from essaybench.llm.ledger import Ledger
from tests.llm.batch.conftest import gateway, requests


def main(ledger_path: str, url: str, protocol: str, n: str, stop_at: str) -> None:
    def step(name: str) -> None:
        print(name, flush=True)
        if name == stop_at:
            print("STOPPED", flush=True)
            time.sleep(600)  # the test kills us here

    with Ledger(Path(ledger_path), linger_s=0) as ledger:
        runner = BatchRunner(gateway(FakeServerHandle(url), ledger, batch=protocol),
                             BatchOptions(poll_initial_s=0.05, poll_max_s=0.2), on_step=step)
        asyncio.run(runner.run(requests(int(n))))
    print("DONE", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
