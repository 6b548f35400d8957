"""The first ``pulumi up``: its preview, where nothing Azure computes is known yet.

The stacks run under :class:`stepway_infra.mocks.PlainMocks`, which returns the inputs
and fakes no computed value (no id, endpoint, host name or address)."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from pulumi.output import Unknown

from stepway_infra.components.base import ProgramError, present
from stepway_infra.mocks import StackResult, has_unknown

APP = "azure-native:app:ContainerApp"
JOB = "azure-native:app:Job"


@pytest.fixture(params=["dev", "prod"])
def preview(request: pytest.FixtureRequest) -> StackResult:
    return request.getfixturevalue(f"{request.param}_preview")


def strings(value: Any, path: str = "") -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [pair for key, item in value.items() for pair in strings(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [pair for i, item in enumerate(value) for pair in strings(item, f"{path}[{i}]")]
    return [(path, value)] if isinstance(value, str) else []


def test_preview_registers_every_resource(preview: StackResult, request) -> None:
    stack = request.getfixturevalue(f"{preview.config.environment}_stack")
    assert sorted((r.type, r.name) for r in preview.resources) == sorted(
        (r.type, r.name) for r in stack.resources
    )


def test_no_value_contains_none(preview: StackResult) -> None:
    for resource in preview.resources:
        for path, text in strings(resource.inputs):
            # Azure enums whose value is the word None.
            if path in (".publicAccess", ".properties.networkAcls.bypass"):
                continue
            assert "None" not in text, f"{resource.name}{path}: {text!r}"


def test_app_settings_are_known_or_unknown_never_wrong(preview: StackResult) -> None:
    """Each env value is a string without 'None', or unknown until Azure computes it."""
    for resource in [*preview.of_type(APP), *preview.of_type(JOB)]:
        containers = resource.inputs["template"]["containers"]
        assert not isinstance(containers, Unknown)
        (container,) = containers
        for item in container["env"]:
            value = item.get("value", item.get("secretRef"))
            assert isinstance(value, Unknown | str), (resource.name, item["name"])
            if isinstance(value, str):
                assert "None" not in value, (resource.name, item["name"])
        env = {item["name"]: item.get("value") for item in container["env"]}
        # Values that depend on nothing Azure computes are known in the preview.
        assert env["STEPWAY_ENVIRONMENT"] == preview.config.environment
        for name in ("AZURE_CLIENT_ID", "APPLICATIONINSIGHTS_CONNECTION_STRING"):
            assert isinstance(env[name], Unknown), name
        if resource.name == "app-act":
            assert (
                env["STEPWAY_QUEUE"]
                == f"servicebus://sb-{preview.config.base_name}.servicebus.windows.net"
            )
            assert isinstance(env["STEPWAY_BACKEND_ENDPOINT"], Unknown)
            assert isinstance(env["STEPWAY_RUN_STORE_URL"], Unknown)
        if resource.name.startswith(("app-worker-", "job-")):
            assert isinstance(env["STEPWAY_SERVER_URL"], Unknown)


def test_unknown_values_are_unknown_where_azure_computes_them(preview: StackResult) -> None:
    scheduler = preview.one("azure-native:durabletask:Scheduler").inputs
    if preview.config.network.nat_gateway:
        # The NAT gateway's address is allocated at creation.
        assert has_unknown(scheduler["properties"]["ipAllowlist"])
    else:
        assert scheduler["properties"]["ipAllowlist"] == preview.config.dts.ip_allowlist
    registry = preview.one(APP, "app-cp").inputs["configuration"]["registries"]
    assert has_unknown(registry)


def test_a_value_azure_did_not_return_after_creation_stops_the_program() -> None:
    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):  # pragma: no cover - no resource registered
            return "", {}

        def call(self, args):  # pragma: no cover
            return {}

    pulumi.runtime.settings.reset_options(project="p", stack="s", preview=False)
    pulumi.runtime.set_mocks(Mocks(), project="p", stack="s", preview=False)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        return present(pulumi.Output.from_input(None), "scheduler endpoint")

    with pytest.raises(ProgramError, match="Azure returned no scheduler endpoint"):
        program()
