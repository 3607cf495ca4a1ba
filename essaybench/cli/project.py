"""``essaybench init DIR``: a project folder of one's own; ``essaybench doctor``: is it
ready for a first run.

    essaybench init DIR [--force]
    essaybench doctor [--call-embedded]

``init`` writes ``essaybench.toml`` (core.project), the benchmark and curate configs
(copies of the packaged defaults), a model registry (the embedded model enabled, the
provider examples commented out), a sources example with the bundled sample raw files,
``.env.example`` (key variable names, never values), ``prefect.yaml`` (the weekly
schedule, run in the project folder), ``.gitignore`` and a short ``README.md``. It never
overwrites a file unless ``--force``.
"""

from __future__ import annotations

import re
import shutil
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated

import typer
import yaml

from essaybench.cli.common import console
from essaybench.cli.errors import fail
from essaybench.cli.project_files import (
    ENV_EXAMPLE_HEAD,
    GITIGNORE,
    PREFECT_YAML,
    PROJECT_README,
    PROJECT_TOML,
)
from essaybench.core.paths import resource
from essaybench.core.project import PROJECT_FILE, load_project

app = typer.Typer()

# What init copies from the package, as (source parts, destination in the project).
COPIED = [
    (("configs", "benchmark.yaml"), "configs/benchmark.yaml"),
    (("configs", "curate.yaml"), "configs/curate.yaml"),  # its paths: ../data/…
    (("data", "sources.yaml"), "data/sources.yaml"),
    (("data", "overrides.yaml"), "data/overrides.yaml"),
]


def commented_examples(examples: str) -> str:
    """The provider examples (configs/models.examples.yaml) as comment lines that go under
    the registry's ``models:``: uncommenting an entry (removing ``# ``) enables it there."""
    lines = [line for line in examples.splitlines() if line.strip() != "models:"]
    return "\n".join(f"# {line}".rstrip() for line in lines) + "\n"


def registry_text() -> str:
    packaged = resource("configs", "models.yaml").read_text(encoding="utf-8")
    examples = resource("configs", "models.examples.yaml").read_text(encoding="utf-8")
    return (packaged.rstrip("\n") + "\n\n  # --- Real providers (configs/models.examples.yaml of "
            "essaybench), commented out.\n  # Uncomment an entry, set `enabled: true`, export "
            "its api_key_env (see .env.example)\n  # and name it in configs/benchmark.yaml.\n"
            + commented_examples(examples))


def key_variables() -> list[str]:
    """The key variable names the packaged registry and the provider examples use."""
    names: list[str] = []
    for file in ("models.yaml", "models.examples.yaml"):
        data = yaml.safe_load(resource("configs", file).read_text(encoding="utf-8"))
        for entry in (data.get("models") or {}).values():
            env = entry.get("api_key_env") if isinstance(entry, dict) else None
            if isinstance(env, str) and env not in names:
                names.append(env)
    return names


def env_example() -> str:
    keys = "".join(f"{name}=\n" for name in key_variables())
    return ENV_EXAMPLE_HEAD + keys


def _prefect_version() -> str:
    try:
        return version("prefect")
    except PackageNotFoundError:
        return "3"


def project_files(root: Path) -> dict[str, str | Path]:
    """Every file of a new project: its path in the project, and its text (or the packaged
    file to copy)."""
    files: dict[str, str | Path] = {PROJECT_FILE: PROJECT_TOML}
    for parts, dest in COPIED:
        files[dest] = resource(*parts)
    files["configs/models.yaml"] = registry_text()
    for raw in sorted(resource("data", "raw").iterdir()):
        if raw.is_file():
            files[f"data/raw/{raw.name}"] = raw
    files[".env.example"] = env_example()
    files["prefect.yaml"] = PREFECT_YAML.format(prefect_version=_prefect_version(),
                                                directory=_yaml_str(str(root)))
    files[".gitignore"] = GITIGNORE
    files["README.md"] = PROJECT_README
    return files


def _yaml_str(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_./-]+", text) else yaml.safe_dump(text).strip()


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(
        metavar="DIR", help="The project folder (made if missing).")],
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite files of the same names already there.")] = False,
) -> None:
    """Write a new project in DIR: essaybench.toml, configs (benchmark, curate, a model
    registry with the embedded model and commented provider examples), a sources example
    with sample raw files, .env.example, prefect.yaml for the weekly schedule and a
    README. Commands run in DIR or below it use this project's configs, registry and
    store."""
    root = directory.expanduser().resolve()
    if root.exists() and not root.is_dir():
        fail(f"{directory} is a file, not a folder")
    files = project_files(root)
    existing = [name for name in files if (root / name).exists()]
    if existing and not force:
        more = f" and {len(existing) - 1} more" if len(existing) > 1 else ""
        fail(f"{root / existing[0]} exists{more}: init never overwrites (use --force)")
    for name, content in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Path):
            shutil.copyfile(content, target)
        else:
            target.write_text(content, encoding="utf-8")
    load_project(root)  # what was written is a valid project
    console.print(f"new essaybench project: {root} ({len(files)} files)", markup=False,
                  soft_wrap=True)
    console.print(f"next: cd {root} && essaybench doctor && essaybench curate && "
                  "essaybench run", markup=False, soft_wrap=True)


@app.command()
def doctor(
    call_embedded: Annotated[bool, typer.Option(
        "--call-embedded", help="Also start the embedded model and make one 1-token call "
        "(seconds; without it, only its runtime and model file are checked).")] = False,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, metavar="SECONDS",
        help="How long each endpoint has to answer its one cheap call.")] = 5.0,
) -> None:
    """Check what a first run needs, one line each (ok / warn / FAIL and what to do): the
    project, configs parse, every model's key variable is set (values are never printed),
    each endpoint answers one cheap call, the embedded model is available, the store is
    writable, the Prefect server (when PREFECT_API_URL is set) answers. Exit 1 on a FAIL."""
    from essaybench.cli.doctor import run_checks

    checks = run_checks(call_embedded=call_embedded, timeout=timeout)
    for check in checks:
        console.print(check.line(), markup=False, soft_wrap=True, highlight=False)
    failed = sum(c.status == "FAIL" for c in checks)
    warned = sum(c.status == "warn" for c in checks)
    console.print(f"{len(checks)} checks: {failed} failed, {warned} warnings", markup=False)
    if failed:
        raise typer.Exit(1)
