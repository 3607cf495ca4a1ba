"""The runbook's examples for two or three hosts (docs/scale-out.md, "Runbook: two or three
hosts"): ops/compose (Docker Compose, one profile per role) and ops/systemd (units and an
environment file per role). Docker and systemd are not available where the tests run, so
this checks what can be checked here: the files parse; every variable they set is one that
something in the picture reads (essaybench's own code, Prefect's settings, botocore, the
PostgreSQL and MinIO images); every `prefect` command they run parses with the installed
Prefect CLI; the topology holds: only the store host has the store, on a local volume; the
worker hosts serve only the `shards` queue, which only `pipeline-shard` uses; the parts
go to a bucket; the templates hold no secret; the runbook names every variable."""

from __future__ import annotations

import configparser
import importlib.util
import re
import shlex
import tomllib
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from essaybench.core.paths import PROJECT_ROOT

OPS = PROJECT_ROOT / "ops"
COMPOSE = OPS / "compose" / "docker-compose.yml"
COMPOSE_ENV = OPS / "compose" / "env.example"
DOCKERFILE = OPS / "compose" / "Dockerfile"
SYSTEMD = OPS / "systemd"
RUNBOOK = PROJECT_ROOT / "docs" / "scale-out.md"
OUR_IMAGE = "essaybench:local"  # built from ops/compose/Dockerfile
# The environment files the units name, and the templates a host copies there.
UNIT_ENV_FILES = {"server.env": ("server.env.example",),
                  "worker.env": ("store-host.env.example", "worker-host.env.example")}
# Variables read by images we do not build, as their documentation names them.
IMAGE_VARIABLES = {"postgres:16": {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB"},
                   "minio/minio": {"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD"}}
_INTERPOLATION = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")
_SECRET_NAME = re.compile(r"KEY|SECRET|PASSWORD|TOKEN")


# --- who reads what ---------------------------------------------------------------------

@cache
def essaybench_variables() -> frozenset[str]:
    """Every ESSAYBENCH_* name the package reads: ``environ.get("X")``, ``environ["X"]``,
    typer's ``envvar="X"``, or a ``NAME_ENV = "X"`` constant read the same way."""
    text = "\n".join(p.read_text(encoding="utf-8")
                     for p in (PROJECT_ROOT / "essaybench").rglob("*.py"))
    read = r"environ(?:\.get\(|\[)\s*"
    names = set(re.findall(read + r'"(ESSAYBENCH_[A-Z0-9_]+)"', text))
    names |= set(re.findall(r'envvar="(ESSAYBENCH_[A-Z0-9_]+)"', text))
    for constant, name in re.findall(r'^(\w+_ENV)\s*=\s*"(ESSAYBENCH_[A-Z0-9_]+)"', text, re.M):
        if re.search(read + constant + r"\b", text):
            names.add(name)
    return frozenset(names)


@cache
def prefect_variables() -> frozenset[str]:
    from prefect.settings import Settings
    from prefect.settings.legacy import _get_valid_setting_names

    spec = importlib.util.find_spec("prefect._internal.analytics.enabled")
    assert spec is not None and spec.origin is not None
    telemetry = {"DO_NOT_TRACK"} if '"DO_NOT_TRACK"' in Path(spec.origin).read_text() else set()
    return frozenset(_get_valid_setting_names(Settings)) | telemetry


@cache
def aws_variables() -> frozenset[str]:
    # botocore has no annotations (no py.typed; botocore-stubs is not a dependency).
    from botocore.configprovider import (  # type: ignore[import-untyped]
        BOTOCORE_DEFAUT_SESSION_VARIABLES,
    )
    from botocore.credentials import EnvProvider  # type: ignore[import-untyped]

    region = BOTOCORE_DEFAUT_SESSION_VARIABLES["region"][1]
    return frozenset({EnvProvider.ACCESS_KEY, EnvProvider.SECRET_KEY, *EnvProvider.TOKENS,
                      region})


@cache
def provider_key_variables() -> frozenset[str]:
    """The api_key_env names of the shipped registry examples."""
    path = PROJECT_ROOT / "essaybench" / "resources" / "configs" / "models.examples.yaml"
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = doc["models"] if isinstance(doc, dict) and "models" in doc else doc
    values = entries.values() if isinstance(entries, dict) else entries
    return frozenset(e["api_key_env"] for e in values if e.get("api_key_env"))


def who_reads(name: str, image: str = OUR_IMAGE) -> str | None:
    if name.startswith("ESSAYBENCH_"):
        return "essaybench" if name in essaybench_variables() else None
    for reader, names in (("prefect", prefect_variables()), ("botocore", aws_variables()),
                          ("a provider key", provider_key_variables()),
                          (image, IMAGE_VARIABLES.get(image, set()))):
        if name in names:
            return reader
    return None


def test_the_readers_are_found() -> None:
    """The sets above are read from the code, so check they hold what we know is read."""
    assert {"ESSAYBENCH_STORE", "ESSAYBENCH_PARTS_URL", "ESSAYBENCH_S3_ENDPOINT_URL",
            "ESSAYBENCH_PUBLISH_URL", "ESSAYBENCH_HOME", "ESSAYBENCH_MODELS",
            "ESSAYBENCH_DEBUG"} <= essaybench_variables()
    assert "ESSAYBENCH_BUCKET" not in essaybench_variables()
    assert {"PREFECT_API_URL", "PREFECT_HOME", "PREFECT_SERVER_DATABASE_CONNECTION_URL",
            "DO_NOT_TRACK"} <= prefect_variables()
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"} <= aws_variables()
    assert {"DEEPSEEK_API_KEY", "OPENAI_API_KEY"} <= provider_key_variables()


# --- the files --------------------------------------------------------------------------

def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))  # anchors and << merged
    assert isinstance(doc, dict)
    return doc


def env_file(path: Path) -> dict[str, str]:
    pairs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep and re.fullmatch(r"[A-Z_][A-Z0-9_]*", name), f"{path.name}: {line!r}"
            pairs[name] = value
    return pairs


def interpolate(text: str, values: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}``, ``${VAR:?message}`` with ``values``."""
    def one(m: re.Match[str]) -> str:
        value = values.get(m.group(1), "")
        return value or (m.group(3) if m.group(2) in (":-", "-") else value) or "x"
    return _INTERPOLATION.sub(one, text)


class _Unit(configparser.ConfigParser):
    def optionxform(self, optionstr: str) -> str:
        return optionstr  # systemd's keys keep their case


def unit(path: Path) -> configparser.ConfigParser:
    parser = _Unit(interpolation=None, strict=True)
    parser.read_string(path.read_text(encoding="utf-8"), source=path.name)
    return parser


def commands(service: dict[str, Any], values: dict[str, str]) -> Iterator[list[str]]:
    """The argv lists a compose service runs: its command, or each part of an
    ``sh -c "a && b"`` entrypoint's script."""
    command = service.get("command")
    if command is None:
        return
    if service.get("entrypoint") == ["/bin/sh", "-c"]:
        for part in interpolate(command[0], values).split("&&"):
            yield shlex.split(part)
    else:
        yield [interpolate(c, values) for c in command]


def prefect_parse_error(argv: list[str]) -> str | None:
    """Why the installed Prefect CLI would not take ``argv`` (None: it parses)."""
    from prefect.cli._app import _app

    tokens = [t for t in argv[1:] if t not in ("--no-prompt", "--prompt")]
    try:
        _app.parse_args(tokens, exit_on_error=False, print_error=False)
    except Exception as exc:  # cyclopts' own errors: unknown command or option, bad value
        return f"{' '.join(argv)}: {type(exc).__name__}: {exc}"
    return None


# --- the checks -------------------------------------------------------------------------

def test_compose_sets_only_variables_something_reads() -> None:
    values = env_file(COMPOSE_ENV)
    unread = [f"{name}: {variable}" for name, service in compose()["services"].items()
              for variable in service.get("environment", {})
              if who_reads(variable, service.get("image", OUR_IMAGE)) is None]
    assert not unread, f"variables nothing reads: {unread}"
    # Every ${VAR} the file interpolates is in the template, and the template holds no
    # variable the file does not use.
    used = {m.group(1) for m in _INTERPOLATION.finditer(COMPOSE.read_text(encoding="utf-8"))}
    assert used == set(values), (used ^ set(values))


def test_the_env_templates_hold_no_secret() -> None:
    templates = [COMPOSE_ENV, *sorted(SYSTEMD.glob("*.env.example"))]
    assert len(templates) == 4
    for path in templates:
        for name, value in env_file(path).items():
            if _SECRET_NAME.search(name):
                assert value == "", f"{path.name}: {name} has a value"
            assert not re.search(r"sk-|AKIA[0-9A-Z]{12}", value), f"{path.name}: {name}"


def test_compose_runs_commands_the_installed_prefect_accepts() -> None:
    values = env_file(COMPOSE_ENV)
    ran = []
    for service in compose()["services"].values():
        if service.get("image") != OUR_IMAGE:
            continue
        for argv in commands(service, values):
            assert argv[0] == "prefect", argv
            assert prefect_parse_error(argv) is None, prefect_parse_error(argv)
            ran.append(" ".join(argv[:3]))
    assert {"prefect server start", "prefect worker start", "prefect work-pool create",
            "prefect --no-prompt deploy", "prefect work-queue set-concurrency-limit"} <= set(ran)
    # and a misspelt option would be caught
    assert prefect_parse_error(["prefect", "worker", "start", "--pool", "p", "--queue", "q"])


def test_systemd_units_use_the_same_variables_and_commands() -> None:
    units = sorted(SYSTEMD.glob("*.service"))
    assert [u.name for u in units] == ["essaybench-worker@.service", "prefect-server.service"]
    named: set[str] = set()
    for path in units:
        service = unit(path)["Service"]
        env = Path(service["EnvironmentFile"])
        assert env.parent == Path("/etc/essaybench") and env.name in UNIT_ENV_FILES, env
        named.add(env.name)
        for queue in ("default", "shards"):
            argv = shlex.split(service["ExecStart"].replace("%i", queue).replace("%H", "h"))
            assert Path(argv[0]).name == "prefect", argv
            assert prefect_parse_error([Path(argv[0]).name, *argv[1:]]) is None
    assert named == set(UNIT_ENV_FILES)
    templates = {t for ts in UNIT_ENV_FILES.values() for t in ts}
    assert {p.name for p in SYSTEMD.glob("*.env.example")} == templates
    compose_names = {v for s in compose()["services"].values() for v in s.get("environment", {})}
    for name in templates:
        unread = [v for v in env_file(SYSTEMD / name) if who_reads(v) is None]
        assert not unread, f"{name}: nothing reads {unread}"
        # The same names as the compose example, apart from the provider keys it lists whole.
        extra = set(env_file(SYSTEMD / name)) - compose_names
        assert not extra, f"{name}: {extra} not in the compose example"


def test_only_the_store_host_has_the_store_and_shard_hosts_serve_only_shards() -> None:
    services = compose()["services"]
    with_store = [n for n, s in services.items() if "ESSAYBENCH_STORE" in s.get("environment", {})]
    assert with_store == ["store"]
    store, worker = services["store"], services["worker"]
    assert store["profiles"] == ["store"] and worker["profiles"] == ["worker"]
    # The store is a named volume of the local driver (no driver, no NFS options).
    mounts = {v.split(":", 1)[1]: v.split(":", 1)[0] for v in store["volumes"]}
    store_volume = mounts[store["environment"]["ESSAYBENCH_STORE"]]
    assert compose()["volumes"][store_volume] is None, "the store volume must be local"
    assert not any("store" in v for v in worker.get("volumes", []))

    def queues(argv: list[str]) -> set[str]:
        return {argv[i + 1] for i, a in enumerate(argv) if a == "--work-queue"}

    assert queues(store["command"]) == {"default", "shards"}
    assert queues(worker["command"]) == {"shards"}
    assert store["environment"]["ESSAYBENCH_PARTS_URL"].startswith("s3://")
    assert "ESSAYBENCH_PARTS_URL" not in env_file(SYSTEMD / "worker-host.env.example")
    assert env_file(SYSTEMD / "store-host.env.example")["ESSAYBENCH_PARTS_URL"].startswith("s3://")
    assert "ESSAYBENCH_STORE" not in env_file(SYSTEMD / "worker-host.env.example")
    for host in (store, worker):  # both sign their requests with the bucket's key
        assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                "ESSAYBENCH_S3_ENDPOINT_URL"} <= set(host["environment"])
        assert provider_key_variables() <= set(host["environment"])


@pytest.mark.parametrize("source", ["prefect.yaml", "essaybench init"])
def test_only_the_shard_deployment_leaves_the_default_queue(source: str) -> None:
    if source == "prefect.yaml":
        text = (PROJECT_ROOT / "prefect.yaml").read_text(encoding="utf-8")
    else:
        from essaybench.cli.project_files import PREFECT_YAML

        text = PREFECT_YAML.format(prefect_version="3", directory="/srv/project")
    deployments = yaml.safe_load(text)["deployments"]
    queues = {d["name"]: d["work_pool"].get("work_queue_name") for d in deployments}
    assert queues.pop("pipeline-shard") == "shards"
    assert set(queues.values()) == {None}, queues  # the pool's default queue: the store host
    assert {d["work_pool"]["name"] for d in deployments} == {"essaybench-process"}


def test_the_image_installs_an_extra_that_exists() -> None:
    extras = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    wanted = re.findall(r"'/src\[(\w+)\]'", DOCKERFILE.read_text(encoding="utf-8"))
    assert wanted == ["s3"] and set(wanted) <= set(extras)
    assert compose()["x-essaybench"]["build"]["dockerfile"] == "ops/compose/Dockerfile"


def test_the_runbook_names_every_variable_the_examples_set() -> None:
    text = RUNBOOK.read_text(encoding="utf-8")
    section = text[text.index("## Runbook: two or three hosts"):]
    names = {v for s in compose()["services"].values() if s.get("image") == OUR_IMAGE
             for v in s.get("environment", {})}
    names |= {v for p in SYSTEMD.glob("*.env.example") for v in env_file(p)}
    missing = sorted(n for n in names if f"`{n}" not in section
                     and n not in provider_key_variables())
    assert not missing, f"not in the runbook: {missing}"
