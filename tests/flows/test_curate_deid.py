"""De-identification end to end (issue 27 item 1): ``essaybench curate`` under a real
Prefect engine over chat logs with planted personal data, in mask and in drop mode. No
identifier is left in any file the run writes (every Parquet column, every DuckDB table,
every other file of the store, and Prefect's own database), the funnel counts what was
replaced, and the raw source file is not copied into the store."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from essaybench.cli import app
from essaybench.core.paths import PROJECT_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_engine")]

# Values no other test or sample uses: a hit can only come from this run.
PLANTED = {
    "phone": "139 7531 8642", "id_card": "110105199003074616",
    "email": "lin.xiaoyu2011@example.com", "qq": "2468013579",
    "bank_card": "6222020200112233446", "plate": "京A7Q315", "wechat": "wxid_q7m2k9p4x1",
    "name": "欧阳梓萱", "address": "滨河路27号5单元",
}
ESSAY = "以“{}”为题，写一篇不少于800字的记叙文，2024年10月1日前交。"
LINES = [
    {"id": "u1", "query": f"帮我写一篇记叙文，写我和女儿的故事，600字。我女儿叫{PLANTED['name']}，"
                          f"电话{PLANTED['phone']}，家住{PLANTED['address']}"},
    {"id": "u2", "query": f"身份证号{PLANTED['id_card']}，帮我写一篇作文《我的理想》，不少于800字"},
    {"id": "u3", "query": f"以“坚持”为题写一篇议论文，800字，写完发到{PLANTED['email']}，"
                          f"QQ {PLANTED['qq']}"},
    {"id": "u4", "query": f"写一篇描写秋天的作文，500字，卡号{PLANTED['bank_card']}，车牌"
                          f"{PLANTED['plate']}，微信{PLANTED['wechat']}"},
    # the record's own id is a phone number: the source_ref column is masked too
    {"id": "13572468024", "query": ESSAY.format("桥")},
    *({"id": f"e{i}", "query": ESSAY.format(word)} for i, word in enumerate(
        ["门", "路", "灯", "窗", "河", "山", "家", "树"])),
]
BROKEN = "导出警告：用户 15098761234 的记录损坏"  # a quarantined line's excerpt is stored


def digits(value: str) -> str:
    return re.sub(r"\D", "", value)


SECRETS = [*PLANTED.values(), "13572468024", "15098761234",
           *(digits(v) for v in PLANTED.values() if len(digits(v)) >= 9)]


def _texts(path: Path) -> str:
    """Everything a file holds, as text: Parquet's values, DuckDB's rows, else its bytes."""
    if path.suffix == ".parquet":
        frame = pl.read_parquet(path)
        return "\n".join(str(v) for col in frame.columns for v in frame[col].to_list())
    if path.suffix == ".duckdb":
        with duckdb.connect(str(path), read_only=True) as con:
            tables = [r[0] for r in con.execute("select table_name from information_schema"
                                                ".tables").fetchall()]
            return "\n".join(str(con.execute(f'select * from "{t}"').fetchall())
                             for t in tables)
    return path.read_bytes().decode("utf-8", errors="ignore")


def leaks(folders: list[Path]) -> list[str]:
    found = []
    for folder in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            text = _texts(path)
            found += [f"{path}: {s}" for s in SECRETS if s in text]
    return found


def _prefect_database() -> Path:
    from prefect.settings import get_current_settings

    url = get_current_settings().server.database.connection_url
    assert url is not None
    return Path(url.get_secret_value().split("///", 1)[1])


def curate(tmp_path: Path, mode: str) -> tuple[Path, dict[str, object]]:
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "logs.jsonl").write_text("\n".join([*(json.dumps(x, ensure_ascii=False)
                                                 for x in LINES), BROKEN]) + "\n",
                                    encoding="utf-8")
    (raw / "sources.yaml").write_text(
        "sources:\n  - {name: logs, kind: chat_jsonl, path: logs.jsonl}\n", encoding="utf-8")
    config = yaml.safe_load((PROJECT_ROOT / "configs" / "curate.yaml").read_text("utf-8"))
    config["sources"] = str(raw / "sources.yaml")
    config["classify"]["overrides_path"] = str(PROJECT_ROOT / "data" / "overrides.yaml")
    config["deid"] = {"mode": mode, "names": "cued"}
    (tmp_path / "curate.yaml").write_text(yaml.safe_dump(config, allow_unicode=True),
                                          encoding="utf-8")
    store = tmp_path / "store"
    result = CliRunner().invoke(app, ["curate", "--config", str(tmp_path / "curate.yaml"),
                                      "--store", str(store)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "personal data replaced by placeholders in collect (records):" in result.output
    return store, {"output": result.output}


@pytest.mark.parametrize("mode", ["mask", "drop"])
def test_no_planted_identifier_is_left_in_any_file_the_run_writes(
        tmp_path: Path, mode: str) -> None:
    store, _ = curate(tmp_path, mode)
    assert leaks([store]) == []
    database = _prefect_database()
    assert database.is_file(), database
    assert leaks([database.parent]) == []  # Prefect's database, its journal files
    with duckdb.connect(str(store / "catalog.duckdb"), read_only=True) as con:
        row = con.execute("select meta from snapshots where stage = 'collect'").fetchone()
        [filter_path] = con.execute("select path from snapshots where stage = 'filter'"
                                    ).fetchone() or [None]
        reasons = dict(con.execute(
            "select stage, count(*) from stage_runs group by stage").fetchall())
    assert row is not None and reasons["collect"] == 1
    collect = json.loads(row[0]) if isinstance(row[0], str) else row[0]
    replaced = collect["personal_data"]["replaced"]
    assert replaced == {"address": 1, "bank_card": 1, "email": 1, "id_card": 1, "name": 1,
                        "phone": 3, "plate": 1, "qq": 1, "wechat": 1}
    # records holding any (the phone-number record id and the broken line's excerpt too)
    assert collect["personal_data"]["records"] == 6
    filtered = pl.read_parquet(store / str(filter_path))
    dropped = filtered.filter(pl.col("reason") == "personal_data")["source_ref"].to_list()
    kept = filtered.filter(pl.col("decision") == "kept")
    if mode == "mask":
        assert dropped == []
        assert any("〈电子邮箱〉" in t and "〈QQ号〉" in t for t in kept["text"].to_list())
    else:  # the four requests that held some; a masked record id is no reason to drop
        assert sorted(dropped) == ["u1", "u2", "u3", "u4"]
        assert not any("〈" in t for t in kept["text"].to_list())
    assert "〈电话号码〉" in filtered.filter(pl.col("record_id").is_not_null())[
        "source_ref"].to_list()
