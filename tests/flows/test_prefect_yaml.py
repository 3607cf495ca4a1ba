"""prefect.yaml's deployments point at real flows with parameters those flows accept."""

from __future__ import annotations

import importlib
import inspect

import yaml

from essaybench.core.paths import PROJECT_ROOT


def test_deployments_reference_importable_flows_with_valid_parameters() -> None:
    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    deployments = spec["deployments"]
    assert {d["name"] for d in deployments} >= {"curate", "curate-from-stage", "pipeline-weekly"}
    weekly = next(d for d in deployments if d["name"] == "pipeline-weekly")
    assert [s["cron"] for s in weekly["schedules"]] == ["0 3 * * 1"]
    from prefect.client.schemas.schedules import CronSchedule

    for schedule in weekly["schedules"]:  # Prefect itself validates cron and timezone
        CronSchedule(cron=schedule["cron"], timezone=schedule["timezone"])
    for dep in deployments:
        # A module path, so an installed essaybench (no checkout) runs it: no top-level
        # flows package exists in the wheel.
        module_name, func = dep["entrypoint"].split(":")
        assert module_name.startswith("essaybench.flows."), dep["entrypoint"]
        module = importlib.import_module(module_name)
        flow = getattr(module, func)
        accepted = inspect.signature(flow.fn).parameters
        unknown = set(dep.get("parameters", {})) - set(accepted)
        assert not unknown, f"deployment {dep['name']}: unknown parameters {unknown}"
        for name, value in dep.get("parameters", {}).items():
            if name.endswith(("_path", "_config")):
                assert (PROJECT_ROOT / value).exists(), f"{dep['name']}: {value} missing"
        assert dep["work_pool"]["name"]
