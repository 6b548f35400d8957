"""Stack configuration validation and the Pulumi entry point."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from stepway_infra.config import StackConfigError, load_stack_file, parse_stack_config
from stepway_infra.mocks import run_stack
from stepway_infra.program import ProgramError

REPO = Path(__file__).resolve().parents[3]


def dev_values() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("stepway:")}
    values["location"] = data["azure-native:location"]
    return values


def error_of(values: dict[str, Any]) -> str:
    with pytest.raises(StackConfigError) as info:
        parse_stack_config(values, "Pulumi.test.yaml")
    return str(info.value)


def test_example_stacks_are_valid() -> None:
    dev = load_stack_file(REPO / "Pulumi.dev.yaml")
    prod = load_stack_file(REPO / "Pulumi.prod.yaml")
    assert (dev.environment, dev.production) == ("dev", False)
    assert (prod.environment, prod.production) == ("prod", True)
    assert prod.control_plane.min_replicas >= 2
    assert prod.service_bus.sku == "Premium"


def test_unknown_key_is_named() -> None:
    message = error_of({**dev_values(), "dtss": {}})
    assert "Pulumi.test.yaml" in message
    assert "stepway:dtss: unknown configuration key" in message


def test_unknown_nested_key_is_named() -> None:
    values = dev_values()
    values["storage"] = {**values["storage"], "publicAccess": True}
    assert "stepway:storage.publicAccess: unknown configuration key" in error_of(values)


def test_ip_allowlist_must_be_addresses() -> None:
    values = dev_values()
    values["dts"] = {**values["dts"], "ipAllowlist": ["10.0.0.0/8", "everyone"]}
    message = error_of(values)
    assert "stepway:dts.ipAllowlist" in message
    assert "'everyone' is not an IPv4/IPv6 address or CIDR range" in message


def test_ip_allowlist_is_required_explicitly() -> None:
    values = dev_values()
    values["dts"] = {k: v for k, v in values["dts"].items() if k != "ipAllowlist"}
    assert "stepway:dts.ipAllowlist: Field required" in error_of(values)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"production": True}, "controlPlane.minReplicas must be at least 2"),
        ({"serviceBus": {"sku": "Basic"}}, "stepway:serviceBus.sku"),
        ({"serviceBus": {"sku": "Premium"}}, "capacity must be 1, 2, 4, 8 or 16"),
        ({"dts": {"sku": "Dedicated", "ipAllowlist": []}}, "dts.capacity is required"),
        ({"environment": "Dev_1"}, "stepway:environment"),
        ({"storage": {"payloadRetentionDays": 0}}, "stepway:storage.payloadRetentionDays"),
        (
            {
                "engine": {
                    "orchestrator": {"image": "e", "minReplicas": 0},
                    "activity": {"image": "e"},
                }
            },
            "stepway:engine.orchestrator.minReplicas",
        ),
    ],
)
def test_invalid_values_are_explained(change: dict[str, Any], expected: str) -> None:
    assert expected in error_of({**dev_values(), **change})


def prod_values() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "Pulumi.prod.yaml").read_text())["config"]
    values = {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("stepway:")}
    values["location"] = data["azure-native:location"]
    return values


@pytest.mark.parametrize(
    ("dts", "expected"),
    [
        # Azure's limits: Consumption keeps data 30 days at most, Dedicated 90 and
        # has 1 to 3 capacity units (docs/deploy.md cites the page).
        (
            {"retention": {"completedDays": 31}},
            "31 days exceeds the Consumption SKU's maximum of 30",
        ),
        (
            {"sku": "Dedicated", "capacity": 1, "retention": {"failedDays": 91}},
            "91 days exceeds the Dedicated SKU's maximum of 90",
        ),
        (
            {"sku": "Dedicated", "capacity": 4},
            "stepway:dts.capacity: Input should be less than or equal to 3",
        ),
    ],
)
def test_scheduler_limits(dts: dict[str, Any], expected: str) -> None:
    values = dev_values()
    values["dts"] = {**values["dts"], **dts}
    assert expected in error_of(values)


def test_scheduler_limits_at_the_edge_are_accepted() -> None:
    values = dev_values()
    values["dts"] = {
        **values["dts"],
        "sku": "Dedicated",
        "capacity": 3,
        "retention": {"completedDays": 90, "failedDays": 90},
    }
    assert parse_stack_config(values).dts.capacity == 3


@pytest.mark.parametrize(
    "name",
    [
        "kv-stepway-dev-",
        "kv--stepway",
        "1kv-stepway",
        "kv",
        "kv-stepway-dev-toolong-x1",
        "kv_stepway",
    ],
)
def test_key_vault_name_rules(name: str) -> None:
    message = error_of({**dev_values(), "keyVaultName": name})
    assert f"Key Vault name {name!r} (keyVaultName) must be 3-24" in message


def test_key_vault_default_name_must_fit_too() -> None:
    # kv-<12>-<12>-<6> is 36 characters: the program used to cut it at 24.
    values = {
        **dev_values(),
        "namePrefix": "stepwayplatf",
        "environment": "integration",
        "nameSuffix": "abc123",
    }
    assert "Key Vault name 'kv-stepwayplatf-integration-abc123' (the default" in error_of(values)
    values["keyVaultName"] = "kv-stepway-int-abc123"
    assert parse_stack_config(values).vault_name == "kv-stepway-int-abc123"


def test_production_requires_the_private_network() -> None:
    values = prod_values()
    values["network"] = {"natGateway": True}
    assert "network.privateEndpoints must be true when production is true" in error_of(values)
    values["network"] = {"natGateway": True, "privateEndpoints": True}
    values["dts"] = {**values["dts"], "ipAllowlist": ["0.0.0.0/0"]}
    assert "must not admit every address" in error_of(values)


def test_private_endpoints_need_premium_service_bus() -> None:
    values = {**dev_values(), "network": {"privateEndpoints": True}}
    assert "serviceBus.sku must be Premium with network.privateEndpoints" in error_of(values)


def test_empty_allowlist_needs_the_nat_gateway() -> None:
    values = dev_values()
    values["dts"] = {**values["dts"], "ipAllowlist": []}
    assert "would deny every client, the engine included" in error_of(values)
    values["network"] = {"natGateway": True}
    assert parse_stack_config(values).dts.ip_allowlist == []


@pytest.mark.parametrize(
    ("network", "expected"),
    [
        ({"appsSubnet": "10.50.0.0/23"}, "network.appsSubnet 10.50.0.0/23 is not inside"),
        (
            {"postgresSubnet": "10.40.1.0/24"},
            "network.appsSubnet and network.postgresSubnet overlap",
        ),
        ({"appsSubnet": "10.40.0.0/28"}, "must be a /27 or larger"),
        ({"addressSpace": "10.40.0.1/16"}, "network.addressSpace: '10.40.0.1/16' is not a CIDR"),
    ],
)
def test_network_ranges(network: dict[str, str], expected: str) -> None:
    assert expected in error_of({**dev_values(), "network": network})


def test_worker_override_for_unknown_area(repo_catalog) -> None:
    config = parse_stack_config({**dev_values(), "workers": {"documents": {"minReplicas": 2}}})
    with pytest.raises(ProgramError, match="not in the worker catalog: documents"):
        run_stack(config, repo_catalog)


def test_too_long_area_name_for_an_app_name(tmp_path, dev_config) -> None:
    from workers.catalog import WorkerCatalogEntry

    entry = WorkerCatalogEntry.model_validate(
        {"name": "a_very_long_area_nam", "taskTypes": ["t"], "image": "x"}
    )
    config = dev_config.model_copy(update={"name_prefix": "stepwayplatf"})
    with pytest.raises(ProgramError, match="not a valid Container App name"):
        run_stack(config, [entry])


ENTRY_POINT_SCRIPT = textwrap.dedent(
    """
    import json, runpy, sys
    import pulumi, pulumi.runtime
    from pulumi.runtime.config import set_all_config
    from stepway_infra.mocks import Recorder

    set_all_config(json.loads(sys.argv[1]))
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="stepway", stack="dev", preview=False)

    @pulumi.runtime.test
    def main():
        runpy.run_path(sys.argv[2], run_name="__main__")

    main()
    import platform
    assert callable(platform.system), "stdlib platform is shadowed"
    print(json.dumps(sorted({r.type for r in recorder.resources})))
    """
)


def test_platform_main_runs_the_program_from_stack_config() -> None:
    """``platform/__main__.py`` as Pulumi runs it: config from the engine, cwd platform/."""
    data = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())["config"]
    # The Pulumi CLI hands objects and lists over as JSON text, scalars as strings.
    flat = {
        key: json.dumps(value)
        if isinstance(value, dict | list)
        else str(value).lower()
        if isinstance(value, bool)
        else str(value)
        for key, value in data.items()
    }
    main = REPO / "platform" / "__main__.py"
    result = subprocess.run(
        [sys.executable, "-c", ENTRY_POINT_SCRIPT, json.dumps(flat), str(main)],
        cwd=REPO / "platform",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    types = json.loads(result.stdout.strip().splitlines()[-1])
    assert "azure-native:app:ContainerApp" in types
    assert "azure-native:durabletask:Scheduler" in types


def test_platform_directory_is_not_a_package() -> None:
    assert not (REPO / "platform" / "__init__.py").exists()
    assert sorted(p.name for p in (REPO / "platform").iterdir() if p.name != "__pycache__") == [
        "__main__.py"
    ]
    pulumi_yaml = yaml.safe_load((REPO / "Pulumi.yaml").read_text())
    assert pulumi_yaml["main"] == "platform/"
    assert pulumi_yaml["runtime"] == {"name": "python", "options": {"toolchain": "uv"}}


@pytest.mark.parametrize(
    ("secrets", "fragment"),
    [
        ({"HOSTS": {"hosts": ["a.b"]}}, "reads the variable of the bindings variable"),
        (
            {"db-pass": {"hosts": ["a.b"]}, "DB_PASS": {"hosts": ["c.d"]}},
            "reads the variable of 'db-pass'",
        ),
        ({"api token": {"hosts": ["a.b"]}}, "letters, digits"),
    ],
)
def test_http_task_secret_names_map_to_one_variable_each(
    secrets: dict[str, Any], fragment: str
) -> None:
    """The engine reads a secret's value from STEPWAY_SECRET_<NAME> (upper-cased, '-' as
    '_') and the bindings from STEPWAY_SECRET_HOSTS: names sharing a variable are refused."""
    values = dev_values()
    values["engine"] = {
        **values["engine"],
        "activity": {**values["engine"]["activity"], "secrets": secrets},
    }
    message = error_of(values)
    assert "stepway:engine.activity.secrets" in message and fragment in message
