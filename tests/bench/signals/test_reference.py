"""Gold items: the file is validated strictly; reference metrics per essay (ROUGE-L
against rouge-chinese as an independent check; chrF is sacrebleu's, checked for its
scale and bounds)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml
from rouge_chinese import Rouge

from essaybench.bench.signals.reference import (
    GoldSet,
    chrf,
    load_gold,
    reference_table,
    summarise_reference,
)
from essaybench.core.yamlio import YamlConfigError

REF = "家乡的秋天来得很早。稻田金黄，秋风吹过，人们开始收割。"


def gold_file(path: Path, items: list[dict[str, object]]) -> Path:
    path.write_text(yaml.safe_dump({"prompt_set": "sample", "version": "g1", "items": items},
                                   allow_unicode=True), encoding="utf-8")
    return path


def test_a_gold_file_is_loaded_and_fingerprinted(tmp_path: Path) -> None:
    path = gold_file(tmp_path / "gold.yaml", [
        {"prompt_id": "p1", "reference": REF, "criteria": ["写出秋天的景物"]}])
    loaded = load_gold(path)
    assert loaded.gold.by_prompt()["p1"].criteria == ("写出秋天的景物",)
    assert len(loaded.fingerprint) == 64


@pytest.mark.parametrize(("items", "said"), [
    ([{"prompt_id": "p1", "reference": REF}, {"prompt_id": "p1", "reference": REF}],
     "'p1' appears twice"),
    ([{"prompt_id": "p1", "reference": ""}], "items[0].reference"),
    ([{"prompt_id": "p1", "reference": REF, "score": 3}], "items[0].score")])
def test_a_bad_gold_file_is_a_clear_error(tmp_path: Path, items: list[dict[str, object]],
                                          said: str) -> None:
    path = gold_file(tmp_path / "gold.yaml", items)
    with pytest.raises(YamlConfigError) as err:
        load_gold(path)
    assert f"{path}:" in str(err.value) and said in str(err.value)


def test_metrics_per_essay_and_per_model() -> None:
    loaded_items = [{"prompt_id": "p1", "reference": REF}]
    gold = GoldSet.model_validate({"prompt_set": "s", "version": "g1", "items": loaded_items})
    essay = "家乡的秋天很美。稻田金黄，人们在田里收割。"
    essays = pl.DataFrame({"model": ["a", "a", "b"], "prompt_id": ["p1", "p2", "p1"],
                           "sample_index": [0, 0, 0], "status": ["ok", "ok", "api_error"],
                           "essay_text": [essay, "无关", None]})
    table = reference_table(essays, gold)
    assert table.select("model", "prompt_id").rows() == [("a", "p1")]  # gold prompts, ok
    chars = [c for c in essay if c.isalnum()], [c for c in REF if c.isalnum()]
    expected = Rouge().get_scores(" ".join(chars[0]), " ".join(chars[1]))[0]["rouge-l"]["f"]
    assert table["ref_rouge_l"][0] == pytest.approx(expected, abs=1e-6)
    assert 0 < table["ref_chrf"][0] < 1
    [a] = summarise_reference(table)
    assert (a.n_essays, a.median_rouge_l) == (1, table["ref_rouge_l"][0])


def test_chrf_scale() -> None:
    assert chrf(REF, REF) == pytest.approx(1.0)
    assert chrf("机器学习数据模型", REF) == 0.0
    assert chrf("", REF) is None
    near, far = chrf(REF[:-3], REF), chrf(REF[:8], REF)
    assert near is not None and far is not None and 1.0 > near > far > 0
