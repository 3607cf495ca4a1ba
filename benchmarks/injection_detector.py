"""The injection detector (essaybench/bench/judge/injection.py) measured: recall on
held-out attack sets, false flags on real essays.

    python benchmarks/injection_detector.py [--heldout FILE …] [--show-missed] [--show-false]

Recall: every attack of a held-out set planted in every anchor essay (rubrics/anchors/,
24 essays, 4 genres × 3 levels × 2); an attacked essay counts as caught when any flag
fires. Figures per family and overall, per planted essay and per attack (caught in every
anchor). The sets are every data/injection/heldout_attacks.v<N>.yaml present, each
written apart from the detector's patterns; each set's target depends on whether its
misses were used to widen the patterns (TUNED below):

- a *tuned* set (v1, v2, v3, v4) was measured untuned once (39.5 %, 46.1 %, 57.5 %,
  56.0 %: the honest figures, kept in docs/benchmarks.md), then its misses were seen
  while the patterns were widened: its figure after is optimistic (target ≥ 90 %);
- the *untuned* set is the highest version present (v5, written while v4 was tuned to,
  by someone who never read the detector), unless it is in TUNED: the honest estimate
  of recall on attacks nobody tuned to (target ≥ 70 %, never lowered).
  When the highest version present is a tuned one, the run says that no untuned set
  exists and that the next one needs a new version. Never tune to the untuned set
  before its figure is recorded; once tuned to, add its version to TUNED.

False flags (no attack planted): the 24 anchors; the 300 human-written, teacher-scored
student essays of ../shared/data/aes_dataset (the figure that matters most: real
essays); the 3,875 answers of 20 LLMs to 204 Chinese writing prompts of
../shared/data/writingpreferencebench (many are not essays: speeches to a jury (尊敬的
评委), scripts, code, English text — so its target is looser), and its essay-like tags.

Targets (PASS/FAIL): held-out recall ≥ 90 % (tuned sets) and ≥ 70 % (the untuned one); 0
anchors flagged; ≤ 1 % of the human essays; ≤ 3.5 % of the LLM answers (3.2 % before this
detector was widened, 3.3 % after all four rounds: mostly debate speeches addressing the
judges). CPU: the printed figure is the whole run's; essay_flags itself costs ~1.9 ms per
real essay, median of 5 passes over the 4,175 real texts (1.3 ms before the second
widening, 1.5 ms before the third, 1.63–1.65 ms before the fourth: +15 %; budget 2.0 ms).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

from essaybench.bench.anchors import AnchorEssay, load_anchor_set
from essaybench.bench.judge.attacks import load_heldout
from essaybench.bench.judge.injection import essay_flags

PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared" / "data"
ESSAY_TAGS = {"议论文", "散文", "日常故事", "情感故事", "旅行游记", "科普文章", "人物传记",
              "历史故事", "童话-寓言"}
INJECTION_DATA = PROJECT / "data" / "injection"
# Versions whose misses were used to widen the patterns (their figures are optimistic).
TUNED = frozenset({1, 2, 3, 4})
TARGET_TUNED = 0.90
TARGET_UNTUNED = 0.70  # the newest set nobody tuned to
TARGET_HUMAN = 0.01
TARGET_LLM = 0.035


def human_essays() -> Iterator[tuple[str, str, str]]:
    with (SHARED / "aes_dataset" / "essays_scores.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            yield row["id"], row["title"], "\n".join(row["paragraphs"])


def llm_answers() -> Iterator[tuple[str, str, str, str]]:
    """(id, tag, prompt, answer) of every answer with text."""
    base = SHARED / "writingpreferencebench"
    with (base / "prompts.jsonl").open(encoding="utf-8") as f:
        prompts = {r["question_id"]: r["prompt"] for r in map(json.loads, f)}
    with (base / "responses_scores.jsonl").open(encoding="utf-8") as f:
        for row in map(json.loads, f):
            if row["predict0"]:
                yield (f"{row['model_dir'][:24]}/{row['question_id'][:8]}", row["tag"],
                       prompts[row["question_id"]], row["predict0"])


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} = {100 * k / n:.1f} %" if n else "—"


def _recall(path: Path, anchors: Sequence[AnchorEssay], show_missed: bool) -> float:
    """Print and return the share of planted essays the detector flags."""
    attacks = load_heldout(path).attacks
    caught: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    missed_attacks = []
    for attack in attacks:
        hits = sum(bool(essay_flags(e.prompt, attack.plant(e.essay))) for e in anchors)
        caught[attack.family][0] += hits
        caught[attack.family][1] += len(anchors)
        if hits < len(anchors):
            missed_attacks.append(f"{attack.id} ({hits}/{len(anchors)})")
    print(f"held-out attacks {path.name}: {len(attacks)} × {len(anchors)} anchors")
    for family, (k, n) in sorted(caught.items()):
        print(f"  {family:<20} {_pct(k, n)}")
    k_all = sum(k for k, _ in caught.values())
    n_all = sum(n for _, n in caught.values())
    print(f"  {'recall':<20} {_pct(k_all, n_all)}; attacks caught in every anchor "
          f"{len(attacks) - len(missed_attacks)}/{len(attacks)}")
    if show_missed and missed_attacks:
        print("  missed:", ", ".join(missed_attacks))
    return k_all / n_all


def _version(path: Path) -> int | None:
    found = re.search(r"\.v(\d+)\.ya?ml$", path.name)
    return int(found.group(1)) if found else None


def heldout_files(folder: Path | None = None) -> list[Path]:
    """Every ``heldout_attacks.v<N>.yaml`` in ``folder`` (default data/injection), oldest
    version first."""
    folder = folder or INJECTION_DATA
    found = [(_version(p), p) for p in folder.glob("heldout_attacks.v*.yaml")]
    return [p for v, p in sorted((v, p) for v, p in found if v is not None)]


def newest_heldout(folder: Path | None = None) -> Path:
    """The held-out set of the highest version present."""
    files = heldout_files(folder)
    if not files:
        raise FileNotFoundError(f"no heldout_attacks.v<N>.yaml in {folder or INJECTION_DATA}")
    return files[-1]


def is_tuned(path: Path) -> bool:
    version = _version(path)
    return version is not None and version in TUNED


def target_recall(path: Path) -> float:
    """The recall a held-out file must reach: ≥ 90 % for a version tuned to (TUNED), ≥ 70 %
    for any other (the newest set nobody tuned to; a file without a version counts as
    untuned)."""
    return TARGET_TUNED if is_tuned(path) else TARGET_UNTUNED


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--heldout", type=Path, nargs="+", metavar="FILE",
                        help="Held-out attack files (default: every version present); a "
                             "tuned version's target is ≥ 90 %%, any other's ≥ 70 %%.")
    parser.add_argument("--show-missed", action="store_true")
    parser.add_argument("--show-false", action="store_true")
    args = parser.parse_args(argv)
    started = time.process_time()
    anchors = load_anchor_set().essays
    ok = True
    targets = []
    paths = args.heldout or heldout_files()
    for path in paths:
        if not path.is_file():
            print(f"no held-out attack file {path}", file=sys.stderr)
            return 2
    if not args.heldout and paths and is_tuned(paths[-1]):
        print(f"no untuned held-out set: the newest, {paths[-1].name}, was tuned to (its "
              f"untuned figure is in docs/benchmarks.md); write version "
              f"{(_version(paths[-1]) or 0) + 1} for an honest figure")
    for path in paths:
        target = target_recall(path)
        recall = _recall(path, anchors, args.show_missed)
        state = "tuned to: optimistic" if is_tuned(path) else "untuned"
        print(f"  target ≥ {target:.0%} ({state}): {'met' if recall >= target else 'NOT met'}")
        ok = ok and recall >= target
        targets.append(f"≥ {target:.0%} ({path.name})")
    anchor_flags = sum(bool(essay_flags(e.prompt, e.essay)) for e in anchors)
    print(f"false flags: anchors {_pct(anchor_flags, len(anchors))}")
    ok = ok and anchor_flags == 0
    if not SHARED.is_dir():
        print(f"(no {SHARED}: real-essay false flags not measured)")
    else:
        codes: Counter[str] = Counter()
        shown: list[str] = []
        n_h = f_h = 0
        for eid, title, text in human_essays():
            flags = essay_flags(title, text)
            n_h += 1
            f_h += bool(flags)
            codes.update(flags)
            if flags:
                shown.append(f"    human {eid}: {flags}")
        n_l = f_l = n_e = f_e = 0
        for aid, tag, prompt, text in llm_answers():
            flags = essay_flags(prompt, text)
            n_l += 1
            f_l += bool(flags)
            n_e += tag in ESSAY_TAGS
            f_e += bool(flags) and tag in ESSAY_TAGS
            codes.update(flags)
            if flags:
                shown.append(f"    llm {aid} [{tag}]: {flags}")
        print(f"  human student essays {_pct(f_h, n_h)} (target ≤ {TARGET_HUMAN:.0%})")
        print(f"  LLM answers          {_pct(f_l, n_l)} (target ≤ {TARGET_LLM:.1%}); "
              f"essay-like tags {_pct(f_e, n_e)}")
        print(f"  codes: {dict(sorted(codes.items()))}")
        if args.show_false:
            print("\n".join(shown))
        ok = ok and f_h <= TARGET_HUMAN * n_h and f_l <= TARGET_LLM * n_l
    print(f"CPU {time.process_time() - started:.1f} s")
    print("PASS" if ok else f"FAIL (targets: recall {', '.join(targets)}, no anchor, "
          f"≤ {TARGET_HUMAN:.0%} human, ≤ {TARGET_LLM:.1%} LLM answers flagged)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
