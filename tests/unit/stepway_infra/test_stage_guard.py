"""``stepway:deployStage`` never goes down by accident (it would delete apps)."""

from __future__ import annotations

import pytest

from stepway_infra.components.base import ProgramError
from stepway_infra.mocks import run_stack
from stepway_infra.stage_guard import check_stage


@pytest.mark.parametrize(
    ("previous", "current"),
    [
        (None, "infrastructure"),
        (None, "all"),
        ("infrastructure", "platform"),
        ("platform", "all"),
        ("all", "all"),
        ("platform", "platform"),
    ],
)
def test_same_or_higher_stage_is_deployed(previous, current) -> None:
    assert check_stage(previous, current, allow_downgrade=False) == current


@pytest.mark.parametrize(
    ("previous", "current"),
    [("all", "platform"), ("all", "infrastructure"), ("platform", "infrastructure")],
)
def test_lower_stage_is_refused_unless_allowed(previous, current) -> None:
    with pytest.raises(ProgramError, match=f"'{current}' is lower than '{previous}'"):
        check_stage(previous, current, allow_downgrade=False)
    assert check_stage(previous, current, allow_downgrade=True) == current


def test_the_program_reads_the_stage_its_last_deployment_left(dev_config, repo_catalog) -> None:
    config = dev_config.model_copy(update={"deploy_stage": "platform"})
    with pytest.raises(ProgramError, match="stepway:allowStageDowngrade"):
        run_stack(config, repo_catalog, "dev", previous_outputs={"deployStage": "all"})
    allowed = config.model_copy(update={"allow_stage_downgrade": True})
    result = run_stack(allowed, repo_catalog, "dev", previous_outputs={"deployStage": "all"})
    assert result.outputs["deployStage"] == "platform"


def test_first_deployment_and_raising_the_stage_pass(dev_config, repo_catalog) -> None:
    config = dev_config.model_copy(update={"deploy_stage": "infrastructure"})
    assert run_stack(config, repo_catalog, "dev").outputs["deployStage"] == "infrastructure"
    raised = dev_config.model_copy(update={"deploy_stage": "platform"})
    result = run_stack(
        raised, repo_catalog, "dev", previous_outputs={"deployStage": "infrastructure"}
    )
    assert result.outputs["deployStage"] == "platform"
