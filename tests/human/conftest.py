"""A small synthetic WritingPreferenceBench directory, and the real one when present."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pytest

# tests/human/conftest.py → project root → its sibling ../shared, as tests/conftest.py does.
WPB_DIR = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "writingpreferencebench"

MakeWpb = Callable[..., Path]


def _write(path: Path, rows: Sequence[Mapping[str, object]]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")


def write_wpb(folder: Path, *, n_prompts: int = 12, n_models: int = 4,
              alt_models: int = 2, seed: int = 0) -> Path:
    """Model k writes ~(k+1)·40 Chinese characters and scores better the lower k is;
    the first ``alt_models`` models get a second score (the first, ±1 at random)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    prompts = [{"question_id": f"q{i:03d}", "prompt": f"写一篇文章 {i}",
                "__internal_tags__": ["议论文" if i % 2 else "散文"]} for i in range(n_prompts)]
    models = [{"model_dir": f"Model-{k}_abc{k}", "score_file": f"score/m{k}.json",
               "score_alt_file": f"alt/m{k}.json" if k < alt_models else None,
               "has_responses": True, "n_scored": n_prompts} for k in range(n_models)]
    responses = []
    for p in prompts:
        for k, m in enumerate(models):
            score = int(np.clip(3 - k + rng.integers(-1, 2), 0, 3))
            text = "好" * int((k + 1) * 40 + rng.integers(0, 20)) + "，abc 123。"
            row: dict[str, object] = {
                "question_id": p["question_id"], "model_dir": m["model_dir"],
                "tag": p["__internal_tags__"][0], "predict0": text,
                "completion_tokens": len(text), "word_len": len(text), "score": score,
                "comment": "", "original_item_index": 0}
            if k < alt_models:
                row |= {"score_alt": int(np.clip(score + rng.integers(-1, 2), 0, 3)),
                        "comment_alt": ""}
            responses.append(row)
    _write(folder / "prompts.jsonl", prompts)
    _write(folder / "models.jsonl", models)
    _write(folder / "responses_scores.jsonl", responses)
    return folder


@pytest.fixture
def make_wpb(tmp_path: Path) -> MakeWpb:
    def make(**kwargs: int) -> Path:
        return write_wpb(tmp_path / "wpb", **kwargs)
    return make


@pytest.fixture(scope="session")
def real_wpb() -> Path:
    if not (WPB_DIR / "responses_scores.jsonl").is_file():
        pytest.skip(f"../shared/data not present ({WPB_DIR} missing): "
                    "WritingPreferenceBench tests need it")
    return WPB_DIR
