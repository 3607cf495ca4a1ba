"""Gold sets of a published prompt set: attaching a file (checked against the set), and
which set a run uses.

A run uses the set it already recorded (a rerun: its base run's, so its judge calls are
the same and nothing is paid twice), else the newest set attached to its prompt-set
version. The judge stage records it (``meta.gold``) when ``judge.gold_criteria`` put
criteria into its calls; the alerts stage records it with the reference figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from essaybench.bench.config import BenchmarkConfig
from essaybench.bench.gold import (
    LoadedGold,
    check_prompt_ids,
    fingerprint,
    gold_from_stored,
    load_gold,
)
from essaybench.core.contracts import OK
from essaybench.core.errors import NotFoundError, UserError
from essaybench.store import Store
from essaybench.store.gold_sets import (
    GoldRecord,
    attach_gold_set,
    gold_sets,
    read_gold_content,
)
from essaybench.store.runs import get_run

# stage -> where its meta records the gold set it used
_RECORDED_BY = {"judge": ("gold",), "alerts": ("signals", "reference")}
_CHAIN_MAX = 50


@dataclass(frozen=True)
class AttachedGold:
    record: GoldRecord
    loaded: LoadedGold


def resolve_prompt_set(store: Store, version: str) -> str:
    """``latest`` or a version, checked to be published in ``store``."""
    if version == "latest":
        latest = store.latest_prompt_set_version()
        if latest is None:
            raise NotFoundError(f"no prompt set published in {store.root}: run essaybench "
                                "curate")
        return latest
    if store.get_prompt_set(version) is None:
        raise NotFoundError(f"prompt set {version!r} is not in {store.root}")
    return version


def prompt_ids_of(store: Store, version: str) -> set[str]:
    record = store.get_prompt_set(version)
    if record is None:
        raise NotFoundError(f"prompt set {version!r} is not in {store.root}")
    prompts = pl.read_parquet(store.root / record["parquet_path"], columns=["prompt_id"])
    return {str(p) for p in prompts["prompt_id"]}


def attach_gold_file(store: Store, path: Path | str, prompt_set: str = "latest"
                     ) -> tuple[AttachedGold, bool]:
    """Attach the gold file at ``path`` (YAML or a promoted ``spot_gold.v<N>.jsonl``) to
    the published ``prompt_set``; (the attached set, whether it is new). Every item's
    prompt id must be one of the set's (else one line naming the id and the file line)."""
    version = resolve_prompt_set(store, prompt_set)
    loaded = load_gold(path)
    check_prompt_ids(loaded, prompt_ids_of(store, version), version)
    return _attach(store, version, loaded, str(path))


def _attach(store: Store, version: str, loaded: LoadedGold, source: str
            ) -> tuple[AttachedGold, bool]:
    """Store ``loaded`` as a gold set of prompt set ``version`` (its prompt ids checked
    by the caller); (the attached set, whether it is new)."""
    gold = loaded.gold
    record = GoldRecord(prompt_set_version=version, version=gold.version,
                        sha256=loaded.fingerprint, n_items=len(gold.items),
                        n_criteria=len(gold.criteria()), format=loaded.format,
                        source=source, path="")
    stored, added = attach_gold_set(store, record,
                                    gold.model_dump(mode="json", exclude_none=True))
    return AttachedGold(stored, loaded), added


def carry_gold_set(store: Store, previous: str | None, version: str) -> AttachedGold | None:
    """A newly published prompt set ``version`` takes the newest gold set of ``previous``
    (the version that was the latest), restricted to the prompts it still holds: a weekly
    curation that publishes a new version keeps its gold items (and a run with
    ``judge.gold_criteria`` keeps working) without attaching the file again. Nothing when
    ``version`` has a gold set already, ``previous`` has none, or none of its prompts is
    left; the carried set is stored like an attached one (its sha256 differs when items
    were left out) and says where it came from."""
    if previous is None or previous == version or gold_sets(store, version):
        return None
    older = gold_sets(store, previous)
    if not older:
        return None
    source = stored_gold(store, older[0])
    ids = prompt_ids_of(store, version)
    items = tuple(i for i in source.loaded.gold.items if i.prompt_id in ids)
    if not items:
        return None
    gold = source.loaded.gold.model_copy(update={"items": items})
    carried = LoadedGold(gold, fingerprint(gold), format=source.record.format)
    return _attach(store, version, carried,
                   f"carried from prompt set {previous} ({source.record.source})")[0]


def stored_gold(store: Store, record: GoldRecord) -> AttachedGold:
    loaded = gold_from_stored(read_gold_content(store, record), record.path)
    if loaded.fingerprint != record.sha256:
        raise UserError(f"gold set {record.version} of prompt set {record.prompt_set_version}: "
                        f"{store.root / record.path} does not match its sha256 (edited?)")
    return AttachedGold(record, loaded)


def _recorded_sha(store: Store, run_id: str) -> str | None:
    """The sha256 of the gold set ``run_id`` or the runs it continues recorded."""
    run: str | None = run_id
    for _ in range(_CHAIN_MAX):
        if run is None:
            return None
        for stage_run in store.stage_runs(run, 1000):  # newest first
            keys = _RECORDED_BY.get(stage_run.stage)
            if keys is None or stage_run.status != OK:
                continue
            found: object = stage_run.meta or {}
            for key in keys:
                found = found.get(key) if isinstance(found, dict) else None
            if isinstance(found, dict) and isinstance(found.get("sha256"), str):
                return str(found["sha256"])
        record = get_run(store, run)
        run = record.base_run if record is not None else None
    return None


def run_gold(store: Store, run_id: str, prompt_set_version: str) -> AttachedGold | None:
    """The gold set ``run_id`` uses on ``prompt_set_version``: the one it (or the run it
    continues) recorded, else the newest attached; None: none attached."""
    attached = gold_sets(store, prompt_set_version)
    if not attached:
        return None
    pinned = _recorded_sha(store, run_id)
    chosen = next((r for r in attached if r.sha256 == pinned), attached[0])
    return stored_gold(store, chosen)


def judge_config(store: Store, run_id: str, config: BenchmarkConfig,
                 prompt_set_version: str) -> tuple[BenchmarkConfig, AttachedGold | None]:
    """``config`` whose judge calls carry the acceptance criteria of the run's gold set
    (``judge.gold_criteria``; unchanged when it is off), and that set. On without a set
    attached: a one-line error saying how to attach one."""
    if not config.judge.gold_criteria:
        return config, None
    gold = run_gold(store, run_id, prompt_set_version)
    if gold is None:
        raise NotFoundError(f"judge.gold_criteria is on but no gold set is attached to prompt "
                            f"set {prompt_set_version}: essaybench gold attach --prompt-set "
                            f"{prompt_set_version} FILE (or turn the option off)")
    judge = config.judge.with_criteria(gold.loaded.gold.criteria(), gold.record.sha256)
    return config.model_copy(update={"judge": judge}), gold


def gold_meta(gold: AttachedGold) -> dict[str, object]:
    """What a stage records of the gold set it used."""
    return {**gold.record.identity(), "n_items": gold.record.n_items,
            "n_criteria": gold.record.n_criteria}
