"""``essaybench init`` and ``doctor``, and a project found from a subfolder: the real
command (a subprocess of this environment's ``essaybench``) in temporary folders, the
fake OpenAI-compatible server on 127.0.0.1 as the endpoint. A project's whole run (init,
doctor, curate, run and report from a subfolder) is tests/test_wheel_project.py's, with the
installed wheel."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from essaybench.core.project import PROJECT_FILE, load_project
from essaybench.llm.fake.server import run_fake_server
from essaybench.llm.registry import load_registry

ESSAYBENCH = str(Path(sys.executable).parent / "essaybench")
SECRET = "sk-doctor-test-VALUE-never-printed-4711"


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ESSAYBENCH_", "PREFECT_API_URL"))}
    env.update(PREFECT_HOME=str(tmp / "prefect"), DO_NOT_TRACK="1",
               PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="600", **extra)
    return env


def essaybench(*args: str, cwd: Path, env: dict[str, str],
               timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([ESSAYBENCH, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


def test_init_writes_a_working_project_and_never_overwrites(tmp_path: Path) -> None:
    env = clean_env(tmp_path)
    done = essaybench("init", "proj", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    root = tmp_path / "proj"
    project = load_project(root)
    assert project.store == root / "store" and project.reports == root / "reports"
    for path in (project.benchmark_config, project.curate_config, project.models,
                 root / "data/sources.yaml", root / ".env.example", root / "prefect.yaml",
                 root / "README.md"):
        assert path.is_file(), path
    assert list((root / "data/raw").iterdir())
    # The registry: the embedded model enabled; every provider example, uncommented,
    # is a valid entry of the same registry.
    text = project.models.read_text(encoding="utf-8")
    assert load_registry(project.models).get("smollm2-135m").enabled
    head, marker, examples_block = text.partition("  # --- Real providers")
    assert marker
    uncommented = head + marker + re.sub(r"(?m)^# ", "", examples_block)
    examples = load_registry_text(uncommented, tmp_path)
    assert {"gpt-4o-mini", "deepseek-chat"} <= set(examples)
    # .env.example: names only, no value after any '='
    env_lines = [ln for ln in (root / ".env.example").read_text().splitlines()
                 if ln and not ln.startswith("#")]
    assert "OPENAI_API_KEY=" in env_lines and all(ln.endswith("=") for ln in env_lines)
    deploy = yaml.safe_load((root / "prefect.yaml").read_text(encoding="utf-8"))
    assert deploy["pull"] == [{"essaybench.core.paths.enter_project_home": {
        "directory": str(root)}}]
    assert {d["entrypoint"] for d in deploy["deployments"]} >= {
        "essaybench.flows.pipeline:pipeline_flow", "essaybench.flows.curate:curate_flow"}

    (root / "README.md").write_text("mine", encoding="utf-8")
    again = essaybench("init", str(root), cwd=tmp_path, env=env)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.count("\n") == 1 and "never overwrites (use --force)" in again.stderr
    assert (root / "README.md").read_text() == "mine"
    forced = essaybench("init", str(root), "--force", cwd=tmp_path, env=env)
    assert forced.returncode == 0 and (root / "README.md").read_text() != "mine"


def load_registry_text(text: str, tmp: Path) -> list[str]:
    path = tmp / "uncommented.yaml"
    path.write_text(text, encoding="utf-8")
    return load_registry(path).names()


def test_a_broken_project_file_is_one_line_naming_file_and_field(tmp_path: Path) -> None:
    (tmp_path / PROJECT_FILE).write_text('[paths]\nstor = "x"\n', encoding="utf-8")
    (tmp_path / "sub").mkdir()
    done = essaybench("runs", cwd=tmp_path / "sub", env=clean_env(tmp_path))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: {tmp_path / PROJECT_FILE}: paths.stor: Extra "
                                   "inputs are not permitted")
    missing = essaybench("runs", cwd=tmp_path, env=clean_env(
        tmp_path, ESSAYBENCH_PROJECT=str(tmp_path / "nowhere")))
    assert missing.returncode == 2 and "is not an essaybench project" in missing.stderr


def _project(tmp_path: Path, registry: dict[str, dict[str, object]],
             models: list[str]) -> Path:
    root = tmp_path / "proj"
    essaybench("init", str(root), cwd=tmp_path, env=clean_env(tmp_path)).check_returncode()
    (root / "configs/models.yaml").write_text(yaml.safe_dump({"models": registry}),
                                              encoding="utf-8")
    (root / "configs/benchmark.yaml").write_text(yaml.safe_dump({
        "per_genre": 2, "generate": {"models": models}, "judge": {"judges": [models[0]]}}),
        encoding="utf-8")
    (root / "a" / "b").mkdir(parents=True)
    return root


def _fake(url: str, model_id: str, **more: object) -> dict[str, object]:
    return {"provider": "fake", "family": "fake", "base_url": url, "model_id": model_id,
            "structured_output": "json_schema", **more}


def test_doctor_says_what_is_missing_one_line_each(tmp_path: Path) -> None:
    with run_fake_server() as server:
        root = _project(tmp_path, {
            "live": _fake(server.base_url, "a", api_key_env="EB_DOCTOR_KEY"),
            "closed": _fake(f"http://127.0.0.1:{closed_port()}/v1", "b"),
            "keyless": _fake(server.base_url, "c", api_key_env="EB_DOCTOR_MISSING_KEY"),
        }, ["live", "closed", "keyless"])
        env = clean_env(tmp_path, EB_DOCTOR_KEY=SECRET,
                        ESSAYBENCH_STORE="/proc/essaybench-store")  # not even root writes there
        env.pop("EB_DOCTOR_MISSING_KEY", None)
        done = essaybench("doctor", "--timeout", "3", cwd=root / "a" / "b", env=env)
        received = server.stats().totals.received
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert SECRET not in out + done.stderr
    lines = {ln.split(":")[0][6:]: ln[:4].strip() for ln in out.splitlines() if ":" in ln}
    assert len(out.splitlines()) == 11, out  # 10 checks and the summary
    assert lines["project"] == "ok" and f"ok    project: {root}" in out
    assert lines["benchmark config"] == "ok" and lines["curate config"] == "ok"
    assert lines["model live"] == "ok" and lines["endpoint live"] == "ok"
    assert "$EB_DOCTOR_KEY is set" in out
    assert lines["endpoint closed"] == "FAIL" and "no answer from" in out
    assert lines["model keyless"] == "FAIL"
    assert "$EB_DOCTOR_MISSING_KEY is not set" in out and "endpoint keyless" not in out
    assert lines["store"] == "FAIL" and "/proc is not writable" in out
    assert received == 0  # the cheap call is GET /models: no chat completion sent

    # All fixed: exit 0, and the store is the project's, not created by doctor.
    (tmp_path / "fixed").mkdir()
    with run_fake_server() as server:
        root = _project(tmp_path / "fixed", {"live": _fake(server.base_url, "a")}, ["live"])
        done = essaybench("doctor", cwd=root / "a", env=clean_env(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{root / 'store'} will be made by the first curate or run" in done.stdout
    assert not (root / "store").exists()
    assert "0 failed" in done.stdout

