"""Collect refuses sources that give nothing to curate (issue 25, item 16): curating only
an empty file exited 0 and published an empty prompt set as ``latest``."""

from __future__ import annotations

from pathlib import Path

import pytest

from essaybench.core.errors import UserError
from essaybench.curate.collect import NoRecordsError, run_collect
from essaybench.sources.config import SourcesConfig, SourceSpec


def _sources(tmp_path: Path, **files: str) -> SourcesConfig:
    specs = []
    for name, text in files.items():
        (tmp_path / f"{name}.jsonl").write_text(text, encoding="utf-8")
        specs.append(SourceSpec.model_validate({"name": name, "kind": "chat_jsonl",
                                                "path": f"{name}.jsonl"}))
    return SourcesConfig(base_dir=tmp_path, sources=specs)


def test_only_an_empty_file_is_nothing_to_curate(tmp_path: Path) -> None:
    with pytest.raises(NoRecordsError) as refused:
        run_collect(_sources(tmp_path, logs=""))
    assert isinstance(refused.value, UserError)  # one line, exit 2 at the command line
    assert str(refused.value) == ("nothing to curate: the sources gave no usable record "
                                  f"(logs ({tmp_path / 'logs.jsonl'}): no records (empty))")


def test_every_record_quarantined_is_nothing_to_curate(tmp_path: Path) -> None:
    with pytest.raises(NoRecordsError, match=r"bad \(.*\): 2 records, all quarantined; "
                                             r"empty \(.*\): no records \(empty\)\)$"):
        run_collect(_sources(tmp_path, bad="not json\n[1]\n", empty="\n\n"))


def test_one_usable_record_is_enough(tmp_path: Path) -> None:
    out = run_collect(_sources(tmp_path, good='{"id": "a", "query": "写一篇议论文"}\n',
                               empty=""))
    assert out.table["decision"].to_list() == ["kept"]


def test_batches_make_the_same_table_as_one_batch(tmp_path: Path) -> None:
    lines = [f'{{"id": "q{i}", "query": "以“第{i}次尝试”为题写一篇记叙文，电话13812345678"}}'
             if i % 3 else ("not json" if i % 2 else '{"text": "no query field"}')
             for i in range(23)]
    sources = _sources(tmp_path, logs="\n".join(lines) + "\n",
                       more='{"id": "m", "query": "写一篇议论文"}\n')
    whole = run_collect(sources)
    for size in (1, 5, 23):
        batched = run_collect(sources, batch_rows=size)
        assert batched.table.equals(whole.table)
        assert {k: v for k, v in batched.meta.items() if k != "seconds"} == {
            k: v for k, v in whole.meta.items() if k != "seconds"}
    assert whole.table.height == 24
    assert whole.meta["personal_data"]["records"] == 15  # the phones, masked in every batch


def test_remembered_texts_make_the_same_table(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # collect de-identifies each distinct text once (a chat log repeats itself); with the
    # memo cleared at every record the table and the counts must be the same.
    import essaybench.core.text_memo as text_memo

    texts = ["以“第{i}次尝试”为题写一篇记叙文，电话13812345678", "你好", "写一篇议论文",
             "我女儿叫王梓涵，帮她写一篇作文", "发到wang.xm-2008@163.com就行"]
    lines = [f'{{"id": "q{i % 4}", "query": "{texts[i % 5].format(i=i % 3)}"}}'
             for i in range(40)]
    sources = _sources(tmp_path, logs="\n".join(lines) + "\n")
    remembered = run_collect(sources)
    monkeypatch.setattr(text_memo, "MAX_ENTRIES", 1)
    fresh = run_collect(sources)
    assert fresh.table.equals(remembered.table)
    assert fresh.meta["personal_data"] == remembered.meta["personal_data"]
    assert remembered.meta["personal_data"]["records"] >= 16
