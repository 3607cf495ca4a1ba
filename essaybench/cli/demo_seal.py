"""``essaybench demo`` is sealed from the environment (issue 24, item 4).

The demo shows the pipeline on the bundled offline configuration: its curate and
benchmark configs and model registry as shipped, a store of its own (``demo-store``
beside the default store, unless ``--store`` names one), and no publishing. A shell set
up for a worker (``ESSAYBENCH_BENCHMARK_CONFIG``, ``ESSAYBENCH_MODELS``,
``ESSAYBENCH_PUBLISH_URL``, ``ESSAYBENCH_STORE`` …) must not turn it into a real,
published run: every ``ESSAYBENCH_*`` variable that says *what* to run or *where* to
write is removed from this process's environment before the demo starts (its flows read
the environment in this process), and the registry variable is set to the bundled one.
Variables that only say *how* (``ESSAYBENCH_DEBUG``, ``ESSAYBENCH_EMBEDDED_REPLICAS``)
are kept.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from essaybench.core.paths import default_store_root, resource

KEPT = ("ESSAYBENCH_DEBUG", "ESSAYBENCH_EMBEDDED_REPLICAS")
DEMO_STORE = "demo-store"


@dataclass(frozen=True)
class DemoSettings:
    curate_config: Path
    benchmark_config: Path
    models: Path
    store: Path
    ignored: tuple[str, ...]  # the variables removed, by name (never their values)


def seal_demo(store: Path | None) -> DemoSettings:
    """Remove the environment's say over the demo (see the module docstring) and return
    what it runs with."""
    ignored = tuple(sorted(v for v in os.environ
                           if v.startswith("ESSAYBENCH_") and v not in KEPT))
    for var in ignored:
        del os.environ[var]
    models = resource("configs", "models.yaml")
    os.environ["ESSAYBENCH_MODELS"] = str(models)
    return DemoSettings(resource("configs", "curate.yaml"), resource("configs", "benchmark.yaml"),
                        models, store or _demo_store(), ignored)


def _demo_store() -> Path:
    # Computed with the environment sealed: not $ESSAYBENCH_STORE's. Its parent is made
    # here, as the default store's is (a new store's parent must otherwise exist).
    path = default_store_root().with_name(DEMO_STORE)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
