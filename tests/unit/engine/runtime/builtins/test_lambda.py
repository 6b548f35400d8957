"""LAMBDA as a built-in activity, evaluated in real evaluator processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engine.runtime.builtins import ActivityDeps, run_activity
from engine.runtime.evaluators import EvaluatorLimits, EvaluatorPool


@pytest.fixture(scope="module")
def deps() -> Iterator[ActivityDeps]:
    limits = EvaluatorLimits(cpu_seconds=1, wall_seconds=60, max_output_bytes=100_000)
    with EvaluatorPool(limits).start() as pool:
        yield ActivityDeps(evaluators=pool)


def test_the_script_is_a_function_body_over_the_inputs(deps: ActivityDeps) -> None:
    result = run_activity(
        deps,
        "LAMBDA",
        {
            "input": {"a": 1},
            "scriptExpression": "if ($.input.a == 1) { return {ok: true} } return {ok: false}",
            "_payloadKeyPrefix": "p",
        },
    )
    assert result.status == "COMPLETED"
    assert result.output == {"result": {"ok": True}}


def test_a_script_error_fails_the_task_with_the_error_in_its_output(deps: ActivityDeps) -> None:
    result = run_activity(deps, "LAMBDA", {"scriptExpression": "throw new Error('bad')"})
    assert result.status == "FAILED"
    assert result.reason is not None and "bad" in result.reason
    assert result.output == {"error": result.reason}


def test_an_empty_script_fails_for_good(deps: ActivityDeps) -> None:
    result = run_activity(deps, "LAMBDA", {"scriptExpression": " "})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert result.reason is not None and result.reason.startswith("Empty 'scriptExpression'")


def test_a_spinning_script_meets_the_cpu_limit(deps: ActivityDeps) -> None:
    result = run_activity(deps, "LAMBDA", {"scriptExpression": "while (true) {}"})
    assert result.status == "FAILED_WITH_TERMINAL_ERROR"
    assert result.reason is not None and result.reason.startswith("LAMBDA: ")
