"""Open and multi-genre prompts from generation to Table 5, against the real fake server:
the prompt is sent verbatim, each judge says which genre the essay chose (a ledgered,
nonce-checked call), the essay is scored with that genre's rubric, a failed genre call is
a failed judgment, and Table 5 counts the essays whose genre they chose."""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from essaybench.bench.aggregate import genre_choice, table5, to_markdown
from essaybench.bench.config import select_prompts
from essaybench.bench.generate import GenerateParams, run_generate
from essaybench.bench.health import assess_health
from essaybench.bench.judge.genre import (
    GenreCall,
    GenreReplyError,
    candidate_genres,
    genre_call,
    load_genre_prompt,
    read_genre,
)
from essaybench.bench.judge.judgments import run_judge
from essaybench.bench.judge.prefetch import JudgePrefetch
from essaybench.bench.judge.request import JudgeParams
from essaybench.bench.pairwise.design import PairwiseParams, build_pairs
from essaybench.bench.rubrics import Rubric, load_rubric, rubrics_dir
from essaybench.core.contracts import StageOutput
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.fake.server import FakeServerHandle, run_fake_server
from essaybench.llm.retry import Backoff
from essaybench.llm.session import GatewaySession, open_gateway
from essaybench.llm.types import CallStatus, ChatResult
from tests.llm.conftest import fake_spec, registry_of

FAST = Backoff(base_s=0.01, cap_s=0.05)
WRITER = "writer"
DECIDED = "以“坚持”为题，写一篇议论文。"
OPEN = "文体不限，以“桥”为题写一篇作文。"
CHOICE = "写一篇议论文或记叙文，题目自拟：灯。"
GENRE_CALL = "待判断的作文"  # only the genre call's user message says this


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric()


def prompts() -> pl.DataFrame:
    return pl.DataFrame({
        "prompt_id": ["p-decided", "p-open", "p-choice"],
        "text": [DECIDED, OPEN, CHOICE],
        "genre": ["argumentative", None, None],
        "prompt_set": ["open", "open", "open"],
        "allowed_genres": [["argumentative"], ["any"], ["argumentative", "narrative"]],
    })


def genre_rule(prompt_text: str, genre: str) -> dict[str, Any]:
    """The judge answers ``genre`` to the genre call about ``prompt_text``'s essay (the
    nonce filled in from the schema, as a judge following it would)."""
    return {"contains": [GENRE_CALL, prompt_text], "reply": json.dumps({"genre": genre}),
            "echo_constants": True}


def scenario(*rules: dict[str, Any], faults: Sequence[dict[str, Any]] = ()) -> FakeScenario:
    return FakeScenario.model_validate({"models": {"*": {"rules": list(rules)}},
                                        "faults": list(faults)})


def session(server: FakeServerHandle, store: Path,
            models: Sequence[str]) -> AbstractContextManager[GatewaySession]:
    registry = registry_of(*(fake_spec(m, model_id=f"{m}-id", max_reasks=1, max_retries=0)
                             for m in models))
    return open_gateway(registry, store, list(models), backoff=FAST,
                        base_urls={m: server.base_url for m in models})


def generate(server: FakeServerHandle, store: Path, params: JudgeParams) -> tuple[
        StageOutput, JudgePrefetch]:
    prefetch = JudgePrefetch.for_prompts(prompts(), params)
    assert prefetch is not None
    with session(server, store, [WRITER, *params.judges]) as gateway:
        out = run_generate(prompts(), GenerateParams(models=(WRITER,)), gateway, "ps-test",
                           follow_up=prefetch)
    return out, prefetch


def judge(server: FakeServerHandle, store: Path, essays: pl.DataFrame,
          params: JudgeParams) -> StageOutput:
    with session(server, store, params.judges) as gateway:
        return run_judge(essays, params, gateway)


# --- the call and its reply ----------------------------------------------------------


def test_candidates_are_the_allowed_genres_or_every_genre_for_any(rubric: Rubric) -> None:
    assert candidate_genres(["any"], rubric) == list(rubric.genres)
    assert candidate_genres('["narrative", "argumentative"]', rubric) == [
        "narrative", "argumentative"]
    with pytest.raises(ValueError, match=r"allowed_genres \[\] name no genre"):
        candidate_genres([], rubric)
    with pytest.raises(ValueError, match="poem"):
        candidate_genres(["poem"], rubric)


def _call(rubric: Rubric, essay_text: str = "桥是路的延伸。") -> GenreCall:
    essay = {"prompt_text": CHOICE, "essay_text": essay_text,
             "allowed_genres": ["argumentative", "narrative"]}
    return genre_call("judge-a", essay, rubric, "p#w#0", "judge", 256, 0.2)


def test_the_call_keeps_the_injection_defences(rubric: Rubric) -> None:
    call = _call(rubric)
    system, user = (m.content for m in call.request.messages)
    marker = user.split("<<<PROMPT-", 1)[1].split("\n", 1)[0]
    assert len(marker) == 8 and f"ESSAY-{marker}>>>" in user and f"PROMPT-{marker}" in system
    assert f"<<<PROMPT-{marker}\n{CHOICE}\nPROMPT-{marker}>>>" in user  # verbatim, delimited
    assert user.rstrip().endswith(call.nonce)  # the reminder and the nonce after the essay
    assert call.nonce not in system
    assert "- narrative：记叙文" in system and "descriptive" not in system
    schema = call.request.response_schema
    assert schema is not None
    assert schema["properties"]["genre"]["enum"] == ["argumentative", "narrative"]
    assert schema["properties"]["nonce"]["enum"] == [call.nonce]
    assert schema["additionalProperties"] is False
    assert call.request.tag == "p#w#0#genre" and call.request.stage == "judge"
    assert call.request.params == {"temperature": 0.2, "max_tokens": 256}
    # The same essay makes the same call (a rerun finds it in the ledger); another essay
    # gets other tokens, so no essay can know its own.
    assert _call(rubric).request == call.request
    assert _call(rubric, "另一篇。").nonce != call.nonce


def _result(text: str) -> ChatResult:
    return ChatResult(key="k", model="judge-a", status=CallStatus.OK, text=text)


@pytest.mark.parametrize(("reply", "match"), [
    ('{"nonce": "%s", "genre": "descriptive"}', "not one of the prompt's allowed genres"),
    ('{"nonce": "wrong", "genre": "narrative"}', "does not echo the call's nonce"),
    ('{"nonce": "%s", "genre": "narrative", "score": 10}', "exactly the keys"),
    ('好的。{"nonce": "%s", "genre": "narrative"}', "text before the JSON object"),
    ('{"nonce": "%s", "genre": "narrative"} {"genre": "argumentative"}', "second JSON object"),
    ('{"nonce": "%s", "genre": "narrative", "genre": "argumentative"}', "duplicate key"),
])
def test_a_reply_is_read_strictly(rubric: Rubric, reply: str, match: str) -> None:
    call = _call(rubric)
    text = reply.replace("%s", call.nonce)
    with pytest.raises(GenreReplyError, match=match):
        read_genre(_result(text), call)


def test_a_fenced_exact_reply_names_the_genre(rubric: Rubric) -> None:
    call = _call(rubric)
    text = f'```json\n{{"nonce": "{call.nonce}", "genre": "narrative"}}\n```'
    assert read_genre(_result(text), call) == "narrative"


def test_the_prompt_file_refuses_unknown_placeholders(tmp_path: Path) -> None:
    source = (rubrics_dir() / "genre_prompt.v1.yaml").read_text(encoding="utf-8")
    broken = tmp_path / "genre_prompt.v9.yaml"
    broken.write_text(source.replace("$genre_ids 之一）", "$score_max 之一）"),
                      encoding="utf-8")
    with pytest.raises(ValueError, match=r"unknown placeholders.*score_max"):
        load_genre_prompt(str(broken))


# --- generation to Table 5 -----------------------------------------------------------


def test_open_and_choice_prompts_are_generated_verbatim_then_judged_by_the_chosen_genre(
        tmp_path: Path, rubric: Rubric) -> None:
    params = JudgeParams(judges=["judge-a"])
    rules = (genre_rule(OPEN, "expository"), genre_rule(CHOICE, "narrative"))
    with run_fake_server(scenario(*rules)) as server:
        out, prefetch = generate(server, tmp_path, params)
        essays = out.table
        # The writer echoes what it got: the essay is the prompt, so the prompt went out
        # verbatim (no genre put into it).
        assert essays["prompt_text"].to_list() == essays["essay_text"].to_list() == [
            DECIDED, OPEN, CHOICE]
        assert essays["genre"].to_list() == ["argumentative", None, None]
        assert essays["allowed_genres"].to_list() == prompts()["allowed_genres"].to_list()
        assert prefetch.errors == []
        # Only the decided prompt's essay was judged while generating (1 writer + 1 judge
        # call); the others need their genre first.
        assert server.stats().totals.received == 3 + 1

        judged = judge(server, tmp_path, essays, params)
        after_first = server.stats().totals.received
        assert after_first == 4 + 2 + 2  # two genre calls, two judgments
        again = judge(server, tmp_path, essays, params)  # a rerun pays nothing twice
        assert server.stats().totals.received == after_first

    rows = {r["prompt_id"]: r for r in judged.table.iter_rows(named=True)}
    assert {p: (r["status"], r["genre"], r["genre_source"]) for p, r in rows.items()} == {
        "p-decided": ("ok", "argumentative", "prompt"),
        "p-open": ("ok", "expository", "judge"),
        "p-choice": ("ok", "narrative", "judge")}
    for pid, genre in (("p-open", "expository"), ("p-choice", "narrative")):
        row = rows[pid]
        assert row["essay_genre"] == genre and row["genre_call_status"] == "ok"
        assert set(json.loads(row["scores"])) == set(rubric.question_ids(genre))
        assert row["genre_call_key"] and row["genre_call_key"] != row["call_key"]
    assert json.loads(rows["p-open"]["allowed_genres"]) == ["any"]
    assert rows["p-decided"]["allowed_genres"] is None
    assert judged.meta["genre_calls"] == {"calls": 2, "from_ledger": 0,
                                          "status": {"ok": 2},
                                          "genres": {"expository": 1, "narrative": 1}}
    assert again.meta["genre_calls"]["from_ledger"] == 2
    assert again.table["from_ledger"].all()
    assert again.table.drop("from_ledger").equals(judged.table.drop("from_ledger"))

    t5 = table5(judged.table)
    row = t5.row(0, named=True)
    assert (row["expository/open:chosen"], row["narrative/open:chosen"],
            row["argumentative/open:chosen"], row["overall:chosen"]) == (1, 1, 0, 2)
    assert row["expository/open:n"] == 1
    # By hand: each cell's mean is its one essay's score.
    assert row["narrative/open"] == pytest.approx(rows["p-choice"]["score_weighted"])
    markdown = to_markdown(t5, "score")
    assert "[1 chosen]" in markdown and "[2 chosen]" in markdown
    assert "offered a choice" in markdown


def test_without_open_prompts_table5_is_unchanged(tmp_path: Path) -> None:
    judged = pl.DataFrame({"judge": ["j"], "model": ["m"], "genre": ["narrative"],
                           "prompt_set": ["open"], "status": ["ok"],
                           "score_weighted": [50.0], "genre_source": ["prompt"]})
    t5 = table5(judged)
    assert not [c for c in t5.columns if c.endswith(":chosen")]
    assert "chosen" not in to_markdown(t5, "score")


def test_a_failed_genre_call_is_a_failed_judgment_never_a_default_genre(
        tmp_path: Path) -> None:
    params = JudgeParams(judges=["judge-a", "judge-b"])
    # judge-a answers a genre the choice does not offer (the schema refuses it, the
    # re-ask too); judge-b's calls all fail with HTTP 500.
    rules = (genre_rule(OPEN, "expository"), genre_rule(CHOICE, "descriptive"))
    faults = [{"kind": "status", "status": 500, "models": ["judge-b-id"]}]
    with run_fake_server(scenario(*rules, faults=faults)) as server:
        essays, _ = generate(server, tmp_path, JudgeParams(judges=["judge-a"]))
        judged = judge(server, tmp_path, essays.table, params).table

    rows = {(r["prompt_id"], r["judge"]): r for r in judged.iter_rows(named=True)}
    bad = rows[("p-choice", "judge-a")]
    assert (bad["status"], bad["error_kind"], bad["genre"]) == (
        "parse_error", "genre_schema", None)
    assert bad["genre_source"] == "judge" and bad["genre_call_status"] == "parse_error"
    assert "descriptive" in bad["raw_reply"] and bad["error"].startswith("genre call failed")
    down = rows[("p-open", "judge-b")]
    assert down["status"] == "api_error" and down["error_kind"].startswith("genre_")
    for row in (bad, down):
        assert row["decision"] == row["status"]
        for col in ("scores", "score_weighted", "score_unweighted", "trait_scores"):
            assert row[col] is None, col
    assert rows[("p-open", "judge-a")]["status"] == "ok"

    # Coverage and health count them as failed judgments; no cell holds them.
    t5 = {r["judge"]: r for r in table5(judged).iter_rows(named=True)}
    assert t5["judge-a"]["overall:coverage"] == pytest.approx(2 / 3)
    assert t5["judge-a"]["overall:rows"] == 3
    assert "descriptive/open" not in t5["judge-a"]
    health = {c.judge: c for c in assess_health(essays.table, judged, run_id="r").cells}
    assert health["judge-a"].ok == 2 and health["judge-a"].total == 3
    assert health["judge-a"].causes == {"parse_error (genre_schema)": 1}
    assert health["judge-b"].ok == 0
    # The statistics' genre_choice table, counted by hand: judge-a's three essays, two
    # of them from prompts without a genre, one of those placed (expository/open, ok) and
    # one whose genre call failed; judge-b's genre calls both failed (no cell is placed).
    counts = {(r["judge"], r["cell"]): (r["rows"], r["chosen"], r["chosen_ok"],
                                        r["genre_call_failed"])
              for r in genre_choice(judged).iter_rows(named=True)}
    assert counts == {("judge-a", "overall"): (3, 2, 1, 1),
                      ("judge-a", "expository/open"): (1, 1, 1, 0),
                      ("judge-b", "overall"): (3, 2, 0, 2)}


# --- which prompts a run takes, and pairwise -------------------------------------------


def test_choice_prompts_are_a_pool_of_their_own_and_left_out_by_a_genre_list() -> None:
    decided = pl.DataFrame({
        "prompt_id": [f"p{i}" for i in range(16)],
        "genre": ["argumentative", "narrative", "descriptive", "expository"] * 4,
        "prompt_set": ["open"] * 8 + ["constrained"] * 8})
    choices = pl.DataFrame({"prompt_id": [f"c{i}" for i in range(5)], "genre": [None] * 5,
                            "prompt_set": ["open", "constrained"] * 2 + ["open"]},
                           schema=decided.schema)
    both = pl.concat([decided, choices])
    sample = select_prompts(both, 2, seed=1)
    # The four genres' samples are those drawn without any choice prompt; then two
    # choice prompts, one Open and one Constrained.
    assert sample.filter(pl.col("genre").is_not_null()).equals(select_prompts(decided, 2, 1))
    picked = sample.filter(pl.col("genre").is_null())
    assert sorted(picked["prompt_set"].to_list()) == ["constrained", "open"]
    assert sample.equals(select_prompts(both.reverse(), 2, seed=1))
    # A genre list (the demo's) takes none of them, sampled or not.
    for per_genre in (2, None):
        listed = select_prompts(both, per_genre, 1, genres=("argumentative", "narrative"))
        assert listed["genre"].null_count() == 0 and listed.height > 0
    assert select_prompts(both, None, 0).height == 21


def test_pairwise_designs_no_pair_on_a_prompt_without_a_genre() -> None:
    essays = pl.DataFrame({
        "prompt_id": ["p1", "p1", "p2", "p2"], "model": ["a", "b", "a", "b"],
        "sample_index": [0] * 4, "genre": ["narrative", "narrative", None, None],
        "prompt_set": ["open"] * 4, "prompt_text": ["题一"] * 2 + [OPEN] * 2,
        "essay_text": ["甲", "乙", "丙", "丁"], "status": ["ok"] * 4})
    pairs = build_pairs(essays, PairwiseParams(judges=["j"]))
    assert [(p.prompt_id, p.genre, p.model_a, p.model_b) for p in pairs] == [
        ("p1", "narrative", "a", "b")]


def test_align_score_mode_asks_the_genre_too_and_scores_without_it(tmp_path: Path) -> None:
    # Align-Score does not depend on the genre; the essay still gets its genre (for the
    # Table 5 cell), from the built-in rubric's genres.
    params = JudgeParams(judges=["judge-a"], mode="align_score")
    with run_fake_server(scenario(genre_rule(OPEN, "descriptive"))) as server:
        essays, _ = generate(server, tmp_path, JudgeParams(judges=["judge-a"]))
        judged = judge(server, tmp_path, essays.table, params).table
    row = judged.filter(pl.col("prompt_id") == "p-open").row(0, named=True)
    assert (row["status"], row["genre"], row["genre_source"]) == ("ok", "descriptive", "judge")
    assert row["align_total"] is not None and row["score_weighted"] is None
