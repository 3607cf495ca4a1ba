"""The sources config: which raw files feed the curate flow, validated on load."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from essaybench.core.yamlio import YamlConfigError, read_yaml

SourceKind = Literal["chat_jsonl", "csv", "numbered_text", "parquet"]
Encoding = Literal["auto", "utf-8", "utf-8-sig", "gb18030", "utf-16"]


class SourceConfigError(YamlConfigError):
    """The sources config itself is wrong: names the file, the line and the entry."""


class SourceSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, description="Unique name, stored as each record's source.")
    kind: SourceKind = Field(description="Format of the file.")
    path: str = Field(min_length=1, description="File path, relative to the config file.")
    # default= by keyword: type checkers (dataclass_transform) see a positional default as
    # none, and the field as required in SourceSpec(...) calls.
    encoding: Encoding = Field(
        default="auto", description="Text encoding; auto detects BOM/UTF-8/GB18030.")
    text_field: str = Field(
        default="query", description="chat_jsonl: field holding a single query.")
    messages_field: str = Field(
        default="messages", description="chat_jsonl: field holding a conversation.")
    id_field: str = Field(
        default="id", description="chat_jsonl: field holding the record's own id.")
    text_column: str | None = Field(
        default=None, description="csv/parquet: column holding the prompt.")
    id_column: str | None = Field(
        default=None, description="csv/parquet: column holding the record id.")

    @model_validator(mode="after")
    def _columns_for_tables(self) -> SourceSpec:
        if self.kind in ("csv", "parquet") and not self.text_column:
            raise ValueError(f"source {self.name!r}: kind {self.kind} needs text_column")
        return self


class SourcesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sources: list[SourceSpec] = Field(min_length=1)
    base_dir: Path = Field(Path("."), description="Folder the paths are relative to.")

    @model_validator(mode="after")
    def _unique_names(self) -> SourcesConfig:
        names = [s.name for s in self.sources]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"source names must be unique; repeated: {', '.join(dupes)}")
        return self

    def resolve(self, spec: SourceSpec) -> Path:
        path = Path(spec.path)
        return path if path.is_absolute() else self.base_dir / path


def load_sources(path: Path | str) -> SourcesConfig:
    doc = read_yaml(path, "sources config", error=SourceConfigError)
    # source paths are relative to the config file unless it says otherwise
    doc.data.setdefault("base_dir", str(doc.path.resolve().parent))
    return doc.validate(SourcesConfig)
