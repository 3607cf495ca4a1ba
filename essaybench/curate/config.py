"""The curate flow's configuration: sources plus each stage's parameters."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from essaybench.core.yamlio import YamlConfigError, read_yaml
from essaybench.curate.classify import ClassifyParams
from essaybench.curate.dedup import DedupParams
from essaybench.curate.filter import FilterParams
from essaybench.curate.pii import DeidParams
from essaybench.curate.rouge import RougeParams
from essaybench.sources.config import SourcesConfig, load_sources

__all__ = [
    "CurateConfig", "CurateConfigError", "load_curate_config",
]


class CurateConfigError(YamlConfigError):
    """The curate config is wrong: the message names the file, the line and the field."""


class CurateConfig(BaseModel):
    """How a prompt set is curated from raw sources: the sources config, then the
    filter, dedup, ROUGE-L and classify stages' parameters (``configs/curate.yaml``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: Path = Field(description="The sources config (YAML), relative to this file.")
    deid: DeidParams = Field(default_factory=DeidParams,
                             description="Personal data in raw records: masked, or dropped.")
    filter: FilterParams = Field(default_factory=FilterParams)
    dedup: DedupParams = Field(default_factory=DedupParams)
    rouge: RougeParams = Field(default_factory=RougeParams)
    classify: ClassifyParams = Field(default_factory=ClassifyParams)

    def load_sources(self) -> SourcesConfig:
        return load_sources(self.sources)


def load_curate_config(path: Path | str) -> CurateConfig:
    """Read and validate a curate config file; its ``sources`` path is relative to the
    file. A mistake is a ``CurateConfigError`` naming the file, line and field."""
    doc = read_yaml(path, "curate config", error=CurateConfigError)
    raw = doc.data
    # paths in the file are relative to the file, not to the working directory
    base = doc.path.resolve().parent
    if isinstance(raw.get("sources"), str):  # anything else is left to validation to report
        raw["sources"] = str(_resolve(base, raw["sources"]))
    classify = raw.get("classify")
    overrides = classify.get("overrides_path") if isinstance(classify, dict) else None
    if isinstance(classify, dict) and isinstance(overrides, str) and overrides:
        classify["overrides_path"] = str(_resolve(base, overrides))
    return doc.validate(CurateConfig)


def _resolve(base: Path, value: str) -> Path:
    p = Path(value)
    return p if p.is_absolute() else (base / p).resolve()
