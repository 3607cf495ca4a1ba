"""The curate flow's configuration: sources plus each stage's parameters."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from essaybench.curate.classify import ClassifyParams
from essaybench.curate.dedup import DedupParams
from essaybench.curate.filter import FilterParams
from essaybench.curate.rouge import RougeParams
from essaybench.sources.config import SourcesConfig, load_sources
from essaybench.yamlio import load_strict


class CurateConfigError(ValueError):
    """The curate config is wrong: the message names the file and the field."""


class CurateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: Path = Field(description="The sources config (YAML), relative to this file.")
    filter: FilterParams = Field(default_factory=FilterParams)
    dedup: DedupParams = Field(default_factory=DedupParams)
    rouge: RougeParams = Field(default_factory=RougeParams)
    classify: ClassifyParams = Field(default_factory=ClassifyParams)

    def load_sources(self) -> SourcesConfig:
        return load_sources(self.sources)


def load_curate_config(path: Path | str) -> CurateConfig:
    path = Path(path)
    if not path.is_file():
        raise CurateConfigError(f"curate config not found: {path}")
    try:
        raw = load_strict(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise CurateConfigError(f"curate config {path} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise CurateConfigError(f"curate config {path}: expected a mapping")
    base = path.resolve().parent
    if "sources" in raw:
        raw["sources"] = str(_resolve(base, raw["sources"]))
    classify = raw.get("classify")
    if isinstance(classify, dict) and classify.get("overrides_path"):
        classify["overrides_path"] = str(_resolve(base, classify["overrides_path"]))
    try:
        return CurateConfig.model_validate(raw)
    except ValidationError as exc:
        raise CurateConfigError(f"curate config {path} is invalid:\n{exc}") from exc


def _resolve(base: Path, value: str) -> Path:
    p = Path(value)
    return p if p.is_absolute() else (base / p).resolve()
