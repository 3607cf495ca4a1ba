"""Strict config reading: every mistake names the file and the line, a repeated key included."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from essaybench.bench.config import BenchmarkConfigError, load_benchmark_config
from essaybench.bench.rubrics import RubricError, load_rubric, rubrics_dir
from essaybench.core.hashing import sha256_hex
from essaybench.core.paths import PROJECT_ROOT
from essaybench.core.yamlio import (
    YamlConfigError,
    load_model,
    load_yaml,
    read_config_bytes,
    read_yaml,
)
from essaybench.curate.config import CurateConfigError, load_curate_config
from essaybench.curate.filter_rules import FilterRulesError, default_rules_path, load_rules
from essaybench.curate.labeler import default_template_path, load_label_template
from essaybench.curate.overrides import OverrideFileError, load_overrides
from essaybench.llm.fake.scenario import FakeScenario
from essaybench.llm.registry import RegistryError, load_registry
from essaybench.sources.config import SourceConfigError, load_sources
from essaybench.stages.pairwise import PairwiseConfigError, load_pairwise_params

CONFIGS = PROJECT_ROOT / "configs"


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def message(exc: pytest.ExceptionInfo[YamlConfigError]) -> str:
    return str(exc.value)


# --- the loader ---------------------------------------------------------------------------


def test_duplicate_top_level_key_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "a: 1\nb: 2\na: 3\n")
    with pytest.raises(YamlConfigError) as exc:
        load_yaml(path, "test config")
    assert message(exc) == f"{path}:3:1: test config: duplicate key 'a' (first at line 1)"
    assert (exc.value.path, exc.value.line, exc.value.column) == (str(path), 3, 1)
    assert "<unicode string>" not in message(exc)


def test_duplicate_nested_key_names_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, "judge:\n  judges: [a]\n  temperature: 0\n  judges: [b]\n")
    with pytest.raises(YamlConfigError) as exc:
        load_yaml(path, "benchmark config")
    assert message(exc) == (f"{path}:4:3: benchmark config: duplicate key 'judges' "
                            "(first at line 2)")


def test_duplicate_in_a_flow_mapping_names_the_column(tmp_path: Path) -> None:
    path = write(tmp_path, "x: {k: 1, k: 2}\n")
    with pytest.raises(YamlConfigError, match=r"c\.yaml:1:11: t: duplicate key 'k' "
                                               r"\(first at column 5\)"):
        load_yaml(path, "t")


def test_syntax_error_names_file_and_line_without_quoting_it(tmp_path: Path) -> None:
    path = write(tmp_path, "a: 1\nkey: [sk-SECRET-123\nb: 2\n")
    with pytest.raises(YamlConfigError) as exc:
        load_yaml(path, "test config")
    assert message(exc).startswith(f"{path}:3:2: test config: not valid YAML: ")
    assert "SECRET" not in message(exc) and "\n" not in message(exc)
    assert exc.value.__cause__ is None and exc.value.__suppress_context__


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    missing = tmp_path / "absent.yaml"
    with pytest.raises(YamlConfigError) as exc:
        load_yaml(missing, "sources config")
    assert message(exc) == f"{missing}: sources config: not found"
    with pytest.raises(YamlConfigError, match="cannot read"):
        load_yaml(tmp_path, "sources config")  # a directory
    with pytest.raises(YamlConfigError, match="not found"):
        read_config_bytes(missing, "filter rules")


def test_non_utf8_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "gbk.yaml"
    path.write_bytes("a: 1\nb: 作文\n".encode("gb18030"))
    with pytest.raises(YamlConfigError, match=r"gbk\.yaml:2: t: not UTF-8 text"):
        load_yaml(path, "t")


def test_top_level_must_be_a_mapping_when_asked(tmp_path: Path) -> None:
    path = write(tmp_path, "- a\n- b\n")
    assert load_yaml(path, "t") == ["a", "b"]
    with pytest.raises(YamlConfigError) as exc:
        read_yaml(path, "t")
    assert message(exc) == f"{path}:1: t: expected a mapping at the top level, found list"
    assert read_yaml(write(tmp_path, "# only a comment\n"), "t").data == {}


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str
    weight: float = Field(ge=0)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    items: list[Item] = []


def test_validation_error_names_field_path_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nitems:\n  - id: first\n    weight: 1\n"
                           "  - id: second\n    weight: -2\n    colour: red\n")
    with pytest.raises(YamlConfigError) as exc:
        load_model(Settings, path, "settings")
    assert message(exc).splitlines() == [
        f"{path}:6: settings: items[second].weight: Input should be greater than or equal to 0",
        f"{path}:7: settings: items[second].colour: Extra inputs are not permitted",
    ]
    assert exc.value.line == 6


def test_a_missing_field_points_at_its_parent(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nitems:\n  - weight: 1\n")
    with pytest.raises(YamlConfigError, match=r"c\.yaml:3: s: items\[0\]\.id: Field required"):
        load_model(Settings, path, "s")


def test_validation_messages_never_echo_values(tmp_path: Path) -> None:
    path = write(tmp_path, "name: [sk-SECRET-123]\n")
    with pytest.raises(YamlConfigError) as exc:
        load_model(Settings, path, "s")
    assert "SECRET" not in message(exc) and exc.value.__cause__ is None


def test_fail_and_validate_locate_a_part_of_the_document(tmp_path: Path) -> None:
    path = write(tmp_path, "outer:\n  inner:\n    name: 3\n")
    doc = read_yaml(path, "t")
    assert str(doc.fail("wrong", at=("outer", "inner"))) == f"{path}:2: t: wrong"
    with pytest.raises(YamlConfigError, match=r"c\.yaml:3: t: outer\.inner\.name: "):
        doc.validate(Settings, doc.data["outer"]["inner"], at=("outer", "inner"))


def test_json_files_are_strict_too(tmp_path: Path) -> None:
    dup = write(tmp_path, '{"name": "a", "name": "b"}', "s.json")
    with pytest.raises(YamlConfigError, match=r"s\.json: s: duplicate key 'name'"):
        load_model(Settings, dup, "s")
    bad = write(tmp_path, '{"name": "a",\n}', "t.json")
    with pytest.raises(YamlConfigError, match=r"t\.json:2:1: s: not valid JSON"):
        load_model(Settings, bad, "s")
    assert load_model(Settings, write(tmp_path, '{"name": "a"}', "ok.json"), "s").name == "a"


def test_errors_survive_pickling(tmp_path: Path) -> None:
    # flows hand exceptions across processes
    err = RubricError("x", path="p.yaml", line=3)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is RubricError and (str(back), back.path, back.line) == ("x", "p.yaml", 3)


def test_filter_rules_fingerprint_is_the_hash_of_the_file_bytes() -> None:
    path = default_rules_path("v1")
    assert load_rules(path).sha256 == sha256_hex(path.read_bytes())


# --- every reader names the file and line of a repeated key -------------------------------


def _with_repeat(source: Path, repeat: str) -> tuple[str, int]:
    """The shipped file's text with a top-level key repeated at the end, and that line."""
    text = source.read_text(encoding="utf-8")
    text = text if text.endswith("\n") else text + "\n"
    return text + repeat, text.count("\n") + 1


SCENARIO = "models:\n  m:\n    reply: template\n    template: x\n  m:\n    reply: echo\n"
OVERRIDES = ("version: 1\noverrides:\n  p0123456789abcde: {genre: narrative}\n"
             "  p0123456789abcde: {genre: expository}\n")
SOURCES = ("sources:\n  - name: a\n    kind: chat_jsonl\n    path: a.jsonl\n"
           "    kind: csv\n")
PAIRWISE = "judges: [j]\nseed: 1\nseed: 2\n"

READERS: list[tuple[str, Callable[[Path], Any], type[YamlConfigError], Path | str, str]] = [
    ("benchmark config", load_benchmark_config, BenchmarkConfigError,
     CONFIGS / "benchmark.yaml", "judge: {judges: [x]}\n"),
    ("curate config", load_curate_config, CurateConfigError,
     CONFIGS / "curate.yaml", "sources: other.yaml\n"),
    ("model registry", load_registry, RegistryError, CONFIGS / "models.yaml", "models: {}\n"),
    ("rubric", load_rubric, RubricError, rubrics_dir() / "essaybench.v1.yaml", "id: again\n"),
    ("filter rules", load_rules, FilterRulesError, default_rules_path("v1"), "version: v2\n"),
    ("label prompt template", load_label_template, YamlConfigError,
     default_template_path(), "version: 2\n"),
    ("sources config", load_sources, SourceConfigError, SOURCES, "5:5"),
    ("override file", load_overrides, OverrideFileError, OVERRIDES, "4:3"),
    ("pairwise config", load_pairwise_params, PairwiseConfigError, PAIRWISE, "3:1"),
    ("fake scenario", FakeScenario.from_file, YamlConfigError, SCENARIO, "5:3"),
]


@pytest.mark.parametrize(("what", "reader", "error", "source", "repeat"), READERS,
                         ids=[r[0] for r in READERS])
def test_each_reader_names_file_and_line_of_a_repeated_key(
        tmp_path: Path, what: str, reader: Callable[[Path], Any], error: type[YamlConfigError],
        source: Path | str, repeat: str) -> None:
    if isinstance(source, Path):  # a shipped file with a top-level key repeated at its end
        text, line = _with_repeat(source, repeat)
        where = f"{line}:1"
    else:  # a small file and the line:column of its repeat
        text, where = source, repeat
    path = write(tmp_path, text)
    with pytest.raises(error) as exc:
        reader(path)
    assert message(exc).startswith(f"{path}:{where}: {what}: duplicate key ")


def test_shipped_files_still_load() -> None:
    # the readers moved onto yamlio must accept what they accepted before
    assert load_benchmark_config(CONFIGS / "benchmark.yaml").judge.judges
    assert load_registry(CONFIGS / "models.yaml").names()
    assert load_rubric().fingerprint and load_label_template().version >= 1
    assert load_rules(default_rules_path("v1")).version == "v1"
