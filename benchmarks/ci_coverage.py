"""Coverage of the 95% bootstrap intervals on simulated benchmarks with known truth.

Each simulated benchmark draws true model qualities, a prompt set and judged
outcomes, then builds the intervals exactly as essaybench does:

* **Absolute scores.** Score of model k on prompt p, sample s:
  μ_k + d_p + g_kp + e_kps, with prompt difficulty d_p ~ N(0, 6²) (so the
  population mean over the prompt distribution is μ_k — the estimand),
  model × prompt interaction g ~ N(0, 3²), essay noise e ~ N(0, 5²), a few
  samples per prompt and 5% of judgments failing at random (excluded, never
  imputed). Interval: the paired prompt bootstrap of
  :func:`essaybench.stats.bootstrap.paired_bootstrap_ratio` (what
  ``score_cis`` uses), plain percentile bounds.
* **Bradley–Terry.** Every pair of models on every prompt, outcome drawn from
  Davidson's tie model with true mean-zero strengths θ and tie parameter ν;
  fitted by :func:`essaybench.stats.bradley_terry.bradley_terry_encoded`
  (ridge 1e-3 as in production) and compared with the true ratings
  1000 + 400·log10(e)·θ under the same mean-zero normalisation. Interval:
  prompt-bootstrap percentile bounds.

Coverage is counted over all models × simulations. Two Monte Carlo standard
errors are printed: the binomial one over intervals, and a cluster one over
simulations (the intervals of one benchmark are correlated, e.g. through the
mean-zero constraint), which is the honest one.

    .venv/bin/python benchmarks/ci_coverage.py --sims 1000 --seed 20250101 --workers 2
"""

from __future__ import annotations

import os

# The fits are many small matrix products: BLAS threads only add overhead (4x
# slower measured here) and fight the worker processes, so one thread each. Set
# before numpy is imported; a no-op when this module is imported after numpy.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

from essaybench.stats.bootstrap import paired_bootstrap_ratio  # noqa: E402
from essaybench.stats.bradley_terry import SCALE, bradley_terry_encoded  # noqa: E402
from essaybench.stats.outcomes import EncodedOutcomes  # noqa: E402

TARGET = (0.94, 0.96)


@dataclass(frozen=True)
class SimConfig:
    n_models: int = 8
    prompts_min: int = 150
    prompts_max: int = 300
    samples: int = 2
    fail_rate: float = 0.05
    n_boot: int = 2000
    level: float = 0.95


@dataclass(frozen=True)
class SimResult:
    """Per model of one simulated benchmark: covered? and interval width."""

    abs_covered: np.ndarray
    abs_width: np.ndarray
    bt_covered: np.ndarray
    bt_width: np.ndarray


def simulate_scores(rng: np.random.Generator, cfg: SimConfig,
                    n_prompts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sums, counts) of ok scores per (prompt, model) and the true means μ."""
    mu = rng.normal(70.0, 5.0, size=cfg.n_models)
    difficulty = rng.normal(0.0, 6.0, size=(n_prompts, 1, 1))
    interaction = rng.normal(0.0, 3.0, size=(n_prompts, cfg.n_models, 1))
    noise = rng.normal(0.0, 5.0, size=(n_prompts, cfg.n_models, cfg.samples))
    scores = mu[None, :, None] + difficulty + interaction + noise
    ok = rng.random(scores.shape) >= cfg.fail_rate
    return (np.where(ok, scores, 0.0).sum(axis=2), ok.sum(axis=2).astype(np.float64), mu)


def simulate_pairwise(rng: np.random.Generator, cfg: SimConfig,
                      n_prompts: int) -> tuple[EncodedOutcomes, np.ndarray]:
    """All-pairs Davidson outcomes on every prompt and the true mean-zero θ."""
    k = cfg.n_models
    theta = rng.normal(0.0, 0.5, size=k)
    theta -= theta.mean()
    nu = rng.uniform(0.3, 1.0)
    pairs = np.array([(i, j) for i in range(k) for j in range(i + 1, k)], dtype=np.int64)
    a, b = np.exp(theta[pairs[:, 0]]), np.exp(theta[pairs[:, 1]])
    tie = nu * np.sqrt(a * b)
    probs = np.column_stack([a, b, tie]) / (a + b + tie)[:, None]
    cum = np.cumsum(probs, axis=1)
    u = rng.random((n_prompts, len(pairs)))
    outcome = (u[:, :, None] > cum[None, :, :2]).sum(axis=2)  # 0 first, 1 second, 2 tie
    counts = np.zeros((n_prompts, len(pairs), 3))
    np.put_along_axis(counts, outcome[:, :, None], 1.0, axis=2)
    enc = EncodedOutcomes(models=tuple(f"m{i}" for i in range(k)),
                          prompts=tuple(f"p{p}" for p in range(n_prompts)),
                          pairs=pairs, counts=counts, n_failed=0)
    return enc, theta


def run_one(entropy: tuple[int, int], cfg: SimConfig) -> SimResult:
    """One simulated benchmark from its own seed (so results do not depend on workers)."""
    rng = np.random.default_rng(np.random.SeedSequence(entropy[0], spawn_key=(entropy[1],)))
    n_prompts = int(rng.integers(cfg.prompts_min, cfg.prompts_max + 1))
    sums, counts, mu = simulate_scores(rng, cfg, n_prompts)
    res = paired_bootstrap_ratio(sums, counts, n_boot=cfg.n_boot, level=cfg.level, seed=rng)
    enc, theta = simulate_pairwise(rng, cfg, n_prompts)
    bt = bradley_terry_encoded(enc, n_boot=cfg.n_boot, level=cfg.level, seed=rng)
    truth = 1000.0 + SCALE * theta
    return SimResult(abs_covered=(res.lo <= mu) & (mu <= res.hi), abs_width=res.hi - res.lo,
                     bt_covered=(bt.lo <= truth) & (truth <= bt.hi), bt_width=bt.hi - bt.lo)


@dataclass(frozen=True)
class Coverage:
    share: float
    se_binomial: float
    se_cluster: float
    intervals: int
    mean_width: float

    def in_target(self) -> bool:
        return TARGET[0] <= self.share <= TARGET[1]


def summarise(covered: list[np.ndarray], widths: list[np.ndarray]) -> Coverage:
    flat = np.concatenate(covered).astype(np.float64)
    per_sim = np.array([c.mean() for c in covered])
    share = float(flat.mean())
    se_cluster = float(per_sim.std(ddof=1) / math.sqrt(len(per_sim))) if len(per_sim) > 1 \
        else float("nan")
    return Coverage(share=share, se_binomial=math.sqrt(share * (1 - share) / flat.size),
                    se_cluster=se_cluster, intervals=int(flat.size),
                    mean_width=float(np.concatenate(widths).mean()))


def run(sims: int, seed: int, cfg: SimConfig, workers: int = 1) -> tuple[Coverage, Coverage]:
    """(absolute-score coverage, Bradley–Terry coverage) over ``sims`` benchmarks."""
    jobs = [(seed, i) for i in range(sims)]
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run_one, jobs, [cfg] * sims, chunksize=8))
    else:
        results = [run_one(job, cfg) for job in jobs]
    return (summarise([r.abs_covered for r in results], [r.abs_width for r in results]),
            summarise([r.bt_covered for r in results], [r.bt_width for r in results]))


def _line(name: str, cov: Coverage, unit: str) -> str:
    flag = "OK" if cov.in_target() else "OUTSIDE"
    return (f"{name:<16} coverage {cov.share:.2%}  (MC SE {cov.se_binomial:.2%} binomial, "
            f"{cov.se_cluster:.2%} over sims; {cov.intervals} intervals; "
            f"mean width {cov.mean_width:.2f} {unit})  target 94–96%: {flag}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--sims", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--models", type=int, default=SimConfig.n_models)
    parser.add_argument("--n-boot", type=int, default=SimConfig.n_boot)
    args = parser.parse_args(argv)
    cfg = SimConfig(n_models=args.models, n_boot=args.n_boot)
    start = time.perf_counter()
    absolute, bt = run(args.sims, args.seed, cfg, workers=args.workers)
    elapsed = time.perf_counter() - start
    print(f"{args.sims} simulated benchmarks, {cfg.n_models} models, "
          f"{cfg.prompts_min}–{cfg.prompts_max} prompts, {cfg.n_boot} bootstrap replicates, "
          f"seed {args.seed}, {args.workers} worker(s)")
    print(_line("absolute score", absolute, "points"))
    print(_line("Bradley–Terry", bt, "rating points"))
    print(f"wall time {elapsed:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
