"""De-identification (essaybench/curate/pii) measured on a labelled set written apart
from it, and on the project's own sample prompts.

    python benchmarks/deid.py [--set data/deid/labelled.v1.jsonl] [--names cued|tagged|off]
                              [--show-missed] [--show-false]

The set (data/deid/README.md): 300 chat-log style requests with 504 planted identifiers
labelled by span (393 formatted identifiers: phone, ID card, e-mail, bank card, URL with
a token, IP, QQ, WeChat, plate; 111 names), 106 decoys that look like identifiers but are
not, and 205 essay prompts full of numbers with no personal data; written by someone who
had not read the detector. Scoring as its README proposes:

- a span is *found* when the masked regions cover all its characters; *typed* when also
  the placeholder's kind is the span's type (a stricter figure);
- a *false mask* is any masked character in a clean record, or, in a planted record, a
  mask over a decoy or over text outside every span (beyond whitespace/punctuation);
  masks over public figures' names (鲁迅, 诸葛亮 …) are counted on their own line.

The project's sample (data/sources.yaml through the collect stage's reader and masking):
every record but the four data/README.md labels "personal data" (chatbot_logs lines 16,
53, 89, 131) must come out unmasked.

Targets (issue 27 item 1): recall ≥ 99 % on formatted identifiers; 0 false masks on the
bundled sample prompts; and 0 false masks on the set's clean essay prompts (the numbers
"that must not be masked"). Names, decoys and public names are reported without a target.

Measured (names=cued), v1:
- first, before any miss was looked at (commit 06161ef's detector): formatted
  identifiers 380/393 = 96.69 % (FAIL), names 54/111, clean false masks 1 (张桂梅老师),
  sample 0, decoys masked 3 (ID numbers failing their check digit taken as cards);
  names=tagged: names 83/111, clean false masks 19, sample 7 (高中语文, 孔融让梨 …).
- after widening by kind on v1's misses (optimistic from now on: the next set, v2, must
  be written apart and measured first): 393/393, names 56/111, clean false masks 0,
  sample 0, decoys 0, public names 0; 4 street addresses given after 地址： in
  planted records (the set labels no addresses) are listed apart.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: repo root
from essaybench.core.paths import resource
from essaybench.curate.collect import run_collect
from essaybench.curate.pii import DeidParams, find_personal_data
from essaybench.sources.config import load_sources

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_PERSONAL = {("chatbot_logs", f"line {n}") for n in (16, 53, 89, 131)}
_SPILL = re.compile(r"[\s\W_]*")  # whitespace/punctuation a mask may take beside a span


def newest_set() -> Path:
    found = sorted((ROOT / "data" / "deid").glob("labelled.v*.jsonl"),
                   key=lambda p: int(re.sub(r"\D", "", p.stem.split(".v")[-1]) or 0))
    if not found:
        raise SystemExit("no data/deid/labelled.v<N>.jsonl")
    return found[-1]


def _masked(text: str, names: str) -> tuple[list[tuple[int, int, str]], float]:
    started = time.process_time()
    spans = find_personal_data(text, names=names)
    return [(s.start, s.end, s.kind) for s in spans], time.process_time() - started


def _covered(masks: list[tuple[int, int, str]], start: int, end: int) -> set[str]:
    """Kinds of the masks covering [start, end) entirely (empty: not covered)."""
    cover = [0] * (end - start)
    kinds = set()
    for s, e, kind in masks:
        if s < end and start < e:
            kinds.add(kind)
            for i in range(max(s, start), min(e, end)):
                cover[i - start] = 1
    return kinds if all(cover) else set()


def _false(record: dict[str, Any], masks: list[tuple[int, int, str]]) -> list[str]:
    """Masked pieces outside every span (spill of whitespace/punctuation allowed); in a
    planted record a street address is not counted (the set labels none: listed apart)."""
    text, bad = record["text"], []
    spans = [(s["start"], s["end"]) for s in record["spans"]]
    for s, e, kind in masks:
        inside = [0] * (e - s)
        for a, b in spans:
            for i in range(max(a, s), min(b, e)):
                inside[i - s] = 1
        outside = "".join(text[s + i] for i, flag in enumerate(inside) if not flag)
        if kind == "address" and record["part"] == "planted":
            continue
        if outside and not _SPILL.fullmatch(outside):
            bad.append(f"{kind}:{text[s:e]}")
    return bad


def measure_set(path: Path, names: str, show_missed: bool, show_false: bool
                ) -> dict[str, Any]:
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()
               if line.strip()]
    found: Counter[str] = Counter()
    typed: Counter[str] = Counter()
    total: Counter[str] = Counter()
    false_clean: list[str] = []
    false_planted: list[str] = []
    decoys_masked: Counter[str] = Counter()
    public_masked: list[str] = []
    addresses: list[str] = []
    cpu = 0.0
    missed: dict[str, list[str]] = defaultdict(list)
    for record in records:
        masks, seconds = _masked(record["text"], names)
        cpu += seconds
        text = record["text"]
        for span in record["spans"]:
            kinds = _covered(masks, span["start"], span["end"])
            total[span["type"]] += 1
            found[span["type"]] += bool(kinds)
            typed[span["type"]] += span["type"] in kinds
            if not kinds:
                missed[span["type"]].append(f"{record['id']} {span['value']!r} "
                                            f"({span.get('format')})")
        for decoy in record["decoys"]:
            if any(s < decoy["end"] and decoy["start"] < e for s, e, _ in masks):
                decoys_masked[decoy["kind"]] += 1
        for name in record.get("public_names", []):
            for m in re.finditer(re.escape(name), text):
                if any(s < m.end() and m.start() < e for s, e, _ in masks):
                    public_masked.append(f"{record['id']} {name}")
        addresses += [f"{record['id']} {text[s:e]}" for s, e, kind in masks
                      if kind == "address" and record["part"] == "planted"]
        bad = _false(record, masks)
        (false_clean if record["part"] == "clean" else false_planted).extend(
            f"{record['id']} {b}" for b in bad)
    formatted = [k for k in total if k != "name"]
    n_fmt = sum(total[k] for k in formatted)
    f_fmt = sum(found[k] for k in formatted)
    t_fmt = sum(typed[k] for k in formatted)
    print(f"labelled set {path.relative_to(ROOT)}: {len(records)} records, names={names}")
    for kind in sorted(total):
        print(f"  {kind:10} found {found[kind]}/{total[kind]} = "
              f"{found[kind] / total[kind]:.1%}  typed {typed[kind] / total[kind]:.1%}")
    print(f"  formatted identifiers: found {f_fmt}/{n_fmt} = {f_fmt / n_fmt:.2%}, "
          f"typed {t_fmt / n_fmt:.2%}")
    n_clean = sum(r["part"] == "clean" for r in records)
    print(f"  false masks: clean prompts {len(false_clean)} (in {n_clean} records); planted "
          f"records outside spans {len(false_planted)}")
    print(f"  decoys masked: {sum(decoys_masked.values())} "
          f"{dict(sorted(decoys_masked.items()))}; public names masked: {len(public_masked)}")
    print(f"  street addresses masked in planted records (the set labels none; not counted "
          f"as false): {len(addresses)}")
    print(f"  CPU {cpu / len(records) * 1000:.2f} ms per record")
    if show_missed:
        for kind, items in sorted(missed.items()):
            for item in items:
                print(f"    missed {kind}: {item}")
    if show_false:
        for item in [*false_clean, *false_planted, *public_masked]:
            print(f"    false: {item}")
        for item in addresses:
            print(f"    address: {item}")
    return {"recall": f_fmt / n_fmt, "false_clean": len(false_clean)}


def measure_sample(names: str, show_false: bool) -> int:
    sources = resource("data") / "sources.yaml"
    table = run_collect(load_sources(sources), DeidParams(names=names)).table  # type: ignore[arg-type]
    masked = table.filter(table["pii"].is_not_null())
    false = [r for r in masked.iter_rows(named=True)
             if (r["source"], r["locator"]) not in SAMPLE_PERSONAL]
    hit = {(r["source"], r["locator"]) for r in masked.iter_rows(named=True)}
    print(f"sample prompts (data/sources.yaml): {table.height} records, {masked.height} masked; "
          f"labelled personal data found {len(hit & SAMPLE_PERSONAL)}/{len(SAMPLE_PERSONAL)}; "
          f"false masks {len(false)}")
    if show_false:
        for r in false:
            print(f"    false: {r['source']} {r['locator']} ({r['pii']}): {r['raw_text'][:80]}")
    return len(false)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", type=Path, default=None)
    parser.add_argument("--names", choices=["cued", "tagged", "off"], default="cued")
    parser.add_argument("--show-missed", action="store_true")
    parser.add_argument("--show-false", action="store_true")
    args = parser.parse_args(argv)
    path = (args.set or newest_set()).resolve()
    result = measure_set(path, args.names, args.show_missed, args.show_false)
    sample_false = measure_sample(args.names, args.show_false)
    ok = result["recall"] >= 0.99 and sample_false == 0 and result["false_clean"] == 0
    print(f"{'PASS' if ok else 'FAIL'} (targets: formatted identifiers found ≥ 99%, 0 false "
          f"masks on the sample prompts, 0 on the set's clean essay prompts)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
