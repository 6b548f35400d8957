"""Refuse to lower ``stepway:deployStage`` on a stack that is already higher.

Lowering the stage removes apps from the program, and ``pulumi up`` would delete
them (the worker apps at ``platform``, every app at ``infrastructure``). The stage
a stack last deployed is its own ``deployStage`` stack output; the program reads it
back with a :class:`pulumi.StackReference` to the running stack
(``<organization>/<project>/<stack>``) and fails, before anything is deleted, when
the configured stage is lower. A stack never deployed has no output and passes.
``stepway:allowStageDowngrade: true`` lets an operator lower it on purpose.
"""

from __future__ import annotations

from typing import Any

import pulumi

from stepway_infra.components.base import ProgramError
from stepway_infra.config import StackConfig

STAGES = ("infrastructure", "platform", "all")


def check_stage(previous: Any, current: str, allow_downgrade: bool) -> str:
    """The stage to deploy; raises when ``current`` is below ``previous``."""
    if previous not in STAGES:
        return current
    if STAGES.index(current) < STAGES.index(previous) and not allow_downgrade:
        raise ProgramError(
            f"stepway:deployStage {current!r} is lower than {previous!r}, the stage this "
            f"stack last deployed; lowering it deletes apps. Set "
            "stepway:allowStageDowngrade true to do that on purpose."
        )
    return current


def own_stack_name() -> str:
    # The DIY (file, blob) backends have the single organization "organization".
    organization = pulumi.get_organization() or "organization"
    return f"{organization}/{pulumi.get_project()}/{pulumi.get_stack()}"


def guard_stage(config: StackConfig) -> pulumi.Output[str]:
    """The configured stage, once checked against the stack's previous one."""
    previous = pulumi.StackReference("previous-stage", stack_name=own_stack_name())
    return previous.get_output("deployStage").apply(
        lambda value: check_stage(value, config.deploy_stage, config.allow_stage_downgrade)
    )
