"""Shared fixtures: the real data beside the project, and the stores built once per session."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from essaybench.store import Snapshot, Store
from tests.helpers import JUDGED_FAMILIES, JUDGED_WRITERS, copy_store

if TYPE_CHECKING:
    from tests.s3_server import S3Env, S3Server
    from tests.wheel import InstalledWheel

# Prefect reads its settings on import: give the whole test session a private,
# throwaway Prefect home and no telemetry before any test module imports it.
os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="essaybench-prefect-")
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["DO_NOT_TRACK"] = "1"

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"


# --- parallel workers (pytest-xdist) ------------------------------------------------------
# ``./dev test`` runs the suite on three workers (-n 3 --dist loadgroup;
# ESSAYBENCH_TEST_WORKERS sets another number). Each worker is its own process: its own
# PREFECT_HOME (above), temporary folders, session stores, S3 server and ports (free_port).
# These modules run whole stacks (Prefect servers, workers, PostgreSQL) on a time budget:
# they go to one worker, one after another, so two of them never run at once. Every other
# module stays on one worker (as --dist loadscope would), so a module-scoped fixture (the
# demo's run, ~2 min) is built once, not per worker.
STACKS = ("tests/ops/test_local_stack.py", "tests/ops/test_scale_out.py",
          "tests/flows/test_weekly_deployment.py", "tests/cli/test_temp_server.py",
          "tests/flows/test_batch_suspend.py", "tests/flows/test_weekly_project.py")
# Modules sharing a session fixture too costly to build twice: one group each, so they run
# on one worker and build it once (the wheel and its environment, ~30 s).
SHARED = {"wheel": ("tests/test_wheel.py", "tests/test_wheel_project.py")}


# The groups that take longest (minutes each on a quiet 2-core host), longest first. The
# workers take groups in collection order (pytest_configure turns xdist's "most tests
# first" reordering off), so these start at once and the short ones fill in around them:
# longest-first keeps the two workers' shares even. Left to xdist's own order (by number
# of tests), the stacks and the demo, few tests each, started last and ran alone at the end.
SLOW_FIRST = ("stacks", "tests/cli/test_demo.py", "wheel",
              "tests/stages/test_adaptive.py",
              "tests/llm/test_embedded_cache.py",
              "tests/flows/test_pipeline_flow.py", "tests/stages/test_drift.py",
              "tests/flows/test_deployment_verdicts.py")


def pytest_configure(config: pytest.Config) -> None:
    if config.pluginmanager.hasplugin("xdist"):
        config.option.loadscopereorder = False  # --no-loadscope-reorder: SLOW_FIRST decides


def group_of(nodeid: str) -> str:
    module = nodeid.split("::")[0]
    if module in STACKS:
        return "stacks"
    return next((group for group, modules in SHARED.items() if module in modules), module)


# tryfirst: xdist's worker turns each item's group into its node id (``…@group``) in its own
# collection hook, after this one.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        item.add_marker(pytest.mark.xdist_group(group_of(item.nodeid)))
    rank = {group: i for i, group in enumerate(SLOW_FIRST)}
    # A stable sort: each module's items keep their order (and stay together).
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """On an xdist worker under --dist loadgroup, every grouped item's node id must carry
    its group: when it does not (pytest 9.2 with xdist 3.8 did not), modules are split
    across workers, each builds the module's fixtures (the demo's run twice) and two stack
    modules share the cores. Stop rather than run the suite that way."""
    if not hasattr(session.config, "workerinput") or not session.config.getvalue("loadgroup"):
        return
    lost = [item.nodeid for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(
            f"pytest-xdist's --dist loadgroup is not grouping under pytest {pytest.__version__}"
            f" ({len(lost)} items without their group, e.g. {lost[0]}): see pyproject's pin")


@pytest.fixture(scope="session")
def _shared_prefect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.prefect_server import Processes, start_server

    root = tmp_path_factory.mktemp("prefect-server")
    with Processes(root / "logs") as procs:
        yield start_server(procs, root / "home", timeout=300)


@pytest.fixture
def prefect_server(_shared_prefect_server: str) -> Iterator[str]:
    """The API URL of a real ``prefect server start`` (SQLite, no UI) shared by the stacks
    group's tests that deploy and run on a server of their own: started once per session
    (~10 CPU-seconds, 10-20 s) instead of once per test, and cleared after each test (no
    flow run, deployment or work pool left: ``clear_server``). A test that stops or kills
    its server starts its own (``start_server``)."""
    from tests.prefect_server import clear_server

    yield _shared_prefect_server
    clear_server(_shared_prefect_server)


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    """The wheel built from this checkout, installed in a fresh environment (tests/wheel.py):
    once per session for the tests of the installed package (one xdist group, SHARED)."""
    from tests.wheel import install_wheel

    return install_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not present at {SHARED_DATA}: real-data tests need it")
    return SHARED_DATA


# --- S3 on loopback ---------------------------------------------------------------------
# One moto server for the whole session, started when a test first asks for it (~1-2 s);
# each test gets a bucket of its own (``s3``), so tests never see each other's objects.


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    from tests.s3_server import moto_s3

    with moto_s3() as server:
        yield server


@pytest.fixture
def s3(s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    """Test credentials and the server's endpoint in the environment, a fresh bucket."""
    from tests.s3_server import s3_env

    return s3_env(s3_server, monkeypatch)


@pytest.fixture(scope="session")
def signed_s3_server() -> Iterator[S3Server]:
    """A second moto server that checks every request's signature (``moto_s3(signed=True)``)."""
    from tests.s3_server import moto_s3

    with moto_s3(signed=True) as server:
        yield server


@pytest.fixture
def signed_s3(signed_s3_server: S3Server, monkeypatch: pytest.MonkeyPatch) -> S3Env:
    """The signing server's one key and endpoint in the environment, a fresh bucket."""
    from tests.s3_server import s3_env

    return s3_env(signed_s3_server, monkeypatch)


# --- stores built once per session ------------------------------------------------------
# Building them is the slow part of the stage tests (curation of configs/curate.yaml; a
# run generated, judged and compared through the fake server), so each is built once and
# shared. Shared means read-only: a test that writes to the store asks for the *_copy
# fixture, a private copy in its tmp_path.


@pytest.fixture(scope="session")
def curated(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """configs/curate.yaml curated and published as a prompt set (run "curate")."""
    from essaybench.curate.config import load_curate_config
    from essaybench.curate.funnel import CURATE_STAGES
    from essaybench.stages.curate import publish_prompt_set, run_curation_stage

    store = Store(tmp_path_factory.mktemp("curated") / "store")
    config = load_curate_config(PROJECT_ROOT / "configs" / "curate.yaml")
    snap = None
    for stage in CURATE_STAGES:
        snap = run_curation_stage(store, "curate", stage, config, snap)
    assert snap is not None
    publish_prompt_set(store, "curate", snap)
    return store


@pytest.fixture
def curated_copy(curated: Store, tmp_path: Path) -> Store:
    """A private copy of ``curated`` to write to."""
    return copy_store(curated, tmp_path / "store")


JudgedRun = tuple[Store, Snapshot, Snapshot]


@pytest.fixture(scope="session")
def judged_run(curated: Store, tmp_path_factory: pytest.TempPathFactory) -> JudgedRun:
    """Run "r1" on a copy of ``curated``: the three JUDGED_WRITERS write 4 prompts per
    genre, the qwen judge scores every essay and compares them pairwise (fake server).
    Returns the store, the judge snapshot and the pairwise snapshot."""
    from essaybench.bench.config import BenchmarkConfig
    from essaybench.bench.generate import GenerateParams
    from essaybench.bench.judge.request import JudgeParams
    from essaybench.bench.pairwise.design import PairwiseParams
    from essaybench.llm.fake.scenario import FakeScenario
    from essaybench.llm.fake.server import run_fake_server
    from essaybench.llm.session import open_gateway
    from essaybench.stages.generate import generate_stage
    from essaybench.stages.judge import judge_stage
    from essaybench.stages.pairwise import pairwise_stage
    from tests.llm.conftest import fake_spec, registry_of

    config = BenchmarkConfig(per_genre=4, generate=GenerateParams(models=JUDGED_WRITERS),
                             judge=JudgeParams(judges=["qwen-judge"]),
                             pairwise=PairwiseParams(judges=["qwen-judge"]))
    store = copy_store(curated, tmp_path_factory.mktemp("judged") / "store")
    models = [*JUDGED_WRITERS, "qwen-judge"]
    registry = registry_of(*(fake_spec(m, model_id=m, family=JUDGED_FAMILIES[m])
                             for m in models))
    # Each writer's essays differ ("{model}…"), so the judge's (seeded, random) scores do.
    scenario = FakeScenario.model_validate({"models": {"*": {
        "reply": "template", "template": "{model}：{prompt}"}}})
    with run_fake_server(scenario) as server, open_gateway(
            registry, store.root, models, base_urls=dict.fromkeys(models, server.base_url)
    ) as session:
        gen = generate_stage(store, "r1", config, session)
        judged = judge_stage(store, "r1", config, gen, session)
        assert config.pairwise is not None
        pairs = pairwise_stage(store, "r1", config.pairwise, gen, session)
    return store, judged, pairs


@pytest.fixture
def judged_copy(judged_run: JudgedRun, tmp_path: Path) -> JudgedRun:
    """A private copy of ``judged_run`` to write to, its snapshots read from the copy."""
    store, judged, pairs = judged_run
    copy = copy_store(store, tmp_path / "store")
    return copy, copy.get_snapshot(judged.snapshot_id), copy.get_snapshot(pairs.snapshot_id)
