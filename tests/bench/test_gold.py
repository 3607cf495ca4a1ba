"""One gold format: an operator's YAML file and a promoted spot-check version
(``spot_gold.v<N>.jsonl``, written by the promotion's own code) read as the same gold set;
identity by content; unknown prompt ids named with their file line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from essaybench.bench.gold import (
    GoldError,
    UnknownGoldPromptError,
    check_prompt_ids,
    fingerprint,
    load_gold,
)
from essaybench.bench.spot.gold import promote
from essaybench.core.hashing import sha256_hex

REF = "家乡的秋天来得很早。稻田金黄，秋风吹过，人们开始收割。"


def spot_line(prompt: str, essay: str, score: float, item: str) -> dict[str, object]:
    return {"prompt_id": prompt, "genre": "narrative", "prompt_text": "写秋天",
            "essay_text": essay, "human_scores": {"nar_q1": 7}, "human_score": score,
            "annotators": ["zhang"], "source_run": "2026-W49", "item_id": item,
            "essay_sha256": sha256_hex(essay)}


def test_a_promoted_spot_check_reads_as_a_gold_set(tmp_path: Path) -> None:
    """Per prompt the essay the annotators scored highest is the reference (first on a
    tie), with its human score and where it came from; no criteria; version spot-v<N>."""
    promote(tmp_path, [spot_line("p1", "秋天一般。", 61.0, "I1"),
                       spot_line("p2", "第二题的文章。", 70.0, "I2")])
    path, _ = promote(tmp_path, [spot_line("p1", REF, 84.5, "I3"),
                                 spot_line("p1", "同分但更晚。", 84.5, "I4")])
    loaded = load_gold(path)
    assert path.name == "spot_gold.v2.jsonl" and loaded.format == "spot_jsonl"
    assert loaded.gold.version == "spot-v2" and loaded.gold.prompt_set is None
    p1, p2 = loaded.gold.items
    assert (p1.prompt_id, p1.reference, p1.human_score, p1.source) == (
        "p1", REF, 84.5, "2026-W49:I3")
    assert p2.reference == "第二题的文章。" and p1.criteria == () == p2.criteria
    assert loaded.gold.criteria() == {}
    # each item's line in the file: the line of the essay that became the reference
    lines = path.read_text("utf-8").splitlines()
    assert json.loads(lines[loaded.lines["p1"] - 1])["item_id"] == "I3"


def test_the_identity_is_the_content_not_the_layout(tmp_path: Path) -> None:
    data = {"prompt_set": "sample", "version": "g1", "items": [
        {"prompt_id": "p1", "reference": REF, "criteria": ["写出秋天的景物"]}]}
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    b.write_text("# comment\n" + yaml.safe_dump(data, allow_unicode=True,
                                                default_flow_style=True), encoding="utf-8")
    assert a.read_bytes() != b.read_bytes()
    first, second = load_gold(a), load_gold(b)
    assert first.fingerprint == second.fingerprint == fingerprint(first.gold)
    changed = {**data, "items": [{**data["items"][0], "criteria": ["另一条"]}]}  # type: ignore[dict-item]
    a.write_text(yaml.safe_dump(changed, allow_unicode=True), encoding="utf-8")
    assert load_gold(a).fingerprint != first.fingerprint


def test_an_unknown_prompt_id_is_named_with_its_file_line(tmp_path: Path) -> None:
    path = tmp_path / "gold.yaml"
    path.write_text("version: g1\nitems:\n  - prompt_id: p1\n    reference: 参考\n"
                    "  - prompt_id: 'p-zz'\n    reference: 参考\n"
                    "  - prompt_id: p-yy\n    reference: 参考\n", encoding="utf-8")
    loaded = load_gold(path)
    check_prompt_ids(loaded, ["p1", "p-zz", "p-yy"], "v123")
    with pytest.raises(UnknownGoldPromptError) as err:
        check_prompt_ids(loaded, ["p1"], "v123")
    assert str(err.value) == (f"{path}:5: prompt_id 'p-zz' is not in prompt set v123 "
                              "(and 1 more unknown ids)")
    spot, _ = promote(tmp_path / "spot", [spot_line("p1", REF, 80.0, "I1"),
                                          spot_line("p9", REF + "。", 70.0, "I2")])
    with pytest.raises(UnknownGoldPromptError, match=r"spot_gold\.v1\.jsonl:2: prompt_id "
                                                     r"'p9' is not in prompt set v123$"):
        check_prompt_ids(load_gold(spot), ["p1"], "v123")


@pytest.mark.parametrize(("line", "said"), [
    ("not json", "not a promoted spot-check line"),
    (json.dumps({"prompt_id": "p1", "essay_text": "文"}), "missing field 'human_score'"),
    (json.dumps({"prompt_id": "p1", "essay_text": "", "human_score": 5}),
     "essay_text: String should have at least 1 character")])
def test_a_bad_spot_check_line_is_named(tmp_path: Path, line: str, said: str) -> None:
    path = tmp_path / "spot_gold.v3.jsonl"
    path.write_text(json.dumps(spot_line("p0", REF, 50.0, "I0")) + "\n" + line + "\n",
                    encoding="utf-8")
    with pytest.raises(GoldError) as err:
        load_gold(path)
    assert str(err.value).startswith(f"{path}:2: ") and said in str(err.value)


def test_an_empty_criterion_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "gold.yaml"
    path.write_text(yaml.safe_dump({"version": "g1", "items": [
        {"prompt_id": "p1", "reference": REF, "criteria": ["  "]}]}), encoding="utf-8")
    with pytest.raises(GoldError, match=r"items\[0\]\.criteria"):
        load_gold(path)
