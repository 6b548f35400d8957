"""engine.language.validation: one test per rule, all errors at once, never a crash."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.language.definitions import SubWorkflowParams, TaskDef, WorkflowDef
from engine.language.durations import MAX_WAIT_SECONDS, parse_duration
from engine.language.validation import (
    MAX_DOMAIN_LENGTH,
    MAX_TASK_TYPE_LENGTH,
    ValidationIssue,
    check_coverage,
    errors_only,
    queue_name_problem,
    validate_task_def,
    validate_workflow,
)
from workers.catalog import WorkerCatalogEntry


def task(ref: str, type_: str = "WORKER", name: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"name": name or ref, "taskReferenceName": ref, "type": type_, **fields}


def workflow(*tasks: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": "wf", "tasks": list(tasks), **fields}


def issues(data: Any, task_defs: dict[str, TaskDef] | None = None) -> list[tuple[str, str]]:
    return [(i.path, i.message) for i in validate_workflow(data, task_defs)]


def paths(data: Any) -> list[str]:
    return [path for path, _ in issues(data)]


def only(data: Any) -> tuple[str, str]:
    found = issues(data)
    assert len(found) == 1, found
    return found[0]


# --- a valid definition ------------------------------------------------------------------


def test_a_valid_workflow_has_no_issues() -> None:
    data = workflow(
        task("parse", inputParameters={"url": "${workflow.input.url}"}),
        task(
            "classify", inputParameters={"text": "${parse.output.text}", "id": "${CPEWF_TASK_ID}"}
        ),
        outputParameters={"class": "${classify.output.class}"},
    )
    assert issues(data) == []
    assert validate_workflow(WorkflowDef.model_validate(data)) == []


# --- structure (pydantic) ----------------------------------------------------------------


def test_structural_errors_all_at_once_with_wire_paths() -> None:
    data = {
        "name": "wf",
        "timeoutPolicy": "NEVER",
        "tasks": [
            {"name": "a", "taskReferenceName": "a", "retryCount": -1},
            {
                "name": "s",
                "taskReferenceName": "s",
                "type": "SWITCH",
                "decisionCases": {"yes": [{"name": "b"}]},
            },
            5,
        ],
    }
    found = dict(issues(data))
    assert set(found) == {
        "$.timeoutPolicy",
        "$.tasks[0].retryCount",
        "$.tasks[1].decisionCases.yes[0].taskReferenceName",
        "$.tasks[2]",
    }
    assert "'TIME_OUT_WF' or 'ALERT_ONLY'" in found["$.timeoutPolicy"]
    assert "NEVER" in found["$.timeoutPolicy"]
    assert found["$.tasks[1].decisionCases.yes[0].taskReferenceName"] == "Field required"


def test_task_def_enum_error_names_the_allowed_values() -> None:
    [issue] = validate_task_def({"name": "t", "timeoutPolicy": "SOMETIMES"})
    assert issue.path == "$.timeoutPolicy"
    assert "'RETRY', 'TIME_OUT_WF' or 'ALERT_ONLY'" in issue.message


def test_a_document_that_is_not_an_object() -> None:
    assert paths(["not", "a", "workflow"]) == ["$"]  # type: ignore[arg-type]


# --- references --------------------------------------------------------------------------


def test_duplicate_reference_name_reports_second_occurrence_and_first() -> None:
    data = workflow(
        task("a"),
        task(
            "s",
            "SWITCH",
            expression="k",
            inputParameters={"k": "x"},
            decisionCases={"yes": [task("a", name="other")]},
        ),
    )
    path, message = only(data)
    assert path == "$.tasks[1].decisionCases.yes[0].taskReferenceName"
    assert "'a'" in message and "$.tasks[0]" in message


def test_reference_to_unknown_task_suggests_a_close_name() -> None:
    [issue] = validate_workflow(
        workflow(task("parse"), task("b", inputParameters={"x": "${pares.output.text}"}))
    )
    assert issue.path == "$.tasks[1].inputParameters.x"
    assert "'pares'" in issue.message and "not a task" in issue.message
    assert "'parse'" in issue.message
    assert issue.is_error  # Conductor's ConstraintParamUtil refuses it in a top-level task


def severities(data: Any) -> list[tuple[str, str]]:
    return [(i.path, i.severity) for i in validate_workflow(data)]


def test_an_unknown_reference_outside_a_top_level_tasks_input_is_a_warning() -> None:
    """Conductor checks references only in its top-level tasks' inputParameters; a
    definition exported from it with a stale reference elsewhere must register (the
    reference reads null)."""
    data = workflow(
        task(
            "s",
            "SWITCH",
            expression="k",
            inputParameters={"k": "v"},
            decisionCases={"yes": [task("a", inputParameters={"x": "${gone.output}"})]},
        ),
        outputParameters={"y": "${zz.output}"},
    )
    found = validate_workflow(data)
    assert [(i.path, i.severity) for i in found] == [
        ("$.tasks[0].decisionCases.yes[0].inputParameters.x", "warning"),
        ("$.outputParameters.y", "warning"),
    ]
    assert errors_only(found) == []
    assert str(found[1]).startswith("$.outputParameters.y: warning: ")
    assert "reads null" in str(found[1])


def test_reference_to_a_later_task_is_a_warning() -> None:
    [issue] = validate_workflow(
        workflow(task("a", inputParameters={"x": "${b.output}"}), task("b"))
    )
    assert (issue.path, issue.severity) == ("$.tasks[0].inputParameters.x", "warning")
    assert "runs later" in issue.message


def test_reference_to_itself() -> None:
    _, message = only(workflow(task("a", inputParameters={"x": "${a.status}"})))
    assert "itself" in message


def test_reference_into_a_parallel_fork_branch() -> None:
    data = workflow(
        task(
            "fork",
            "FORK_JOIN",
            forkTasks=[[task("a")], [task("b", inputParameters={"x": "${a.output}"})]],
        ),
        task("join", "JOIN", joinOn=["a", "b"]),
    )
    path, message = only(data)
    assert path == "$.tasks[0].forkTasks[1][0].inputParameters.x"
    assert "parallel branch of FORK_JOIN 'fork'" in message
    assert errors_only(validate_workflow(data)) == []


def test_reference_into_another_switch_case() -> None:
    data = workflow(
        task(
            "s",
            "SWITCH",
            expression="k",
            inputParameters={"k": "v"},
            decisionCases={"yes": [task("a")]},
            defaultCase=[task("b", inputParameters={"x": "${a.input.y}"})],
        ),
    )
    path, message = only(data)
    assert path == "$.tasks[0].defaultCase[0].inputParameters.x"
    assert "another case of SWITCH 's'" in message
    assert errors_only(validate_workflow(data)) == []


def test_tasks_after_a_switch_or_fork_may_reference_tasks_inside() -> None:
    data = workflow(
        task(
            "s",
            "SWITCH",
            expression="k",
            inputParameters={"k": "v"},
            decisionCases={"yes": [task("a")]},
            defaultCase=[task("b")],
        ),
        task("fork", "FORK_JOIN", forkTasks=[[task("c")], [task("d")]]),
        task("join", "JOIN", joinOn=["c", "d"]),
        task("e", inputParameters={"x": "${a.output} ${b.output} ${c.output} ${d.output}"}),
    )
    assert issues(data) == []


def test_nested_tasks_may_reference_their_containers() -> None:
    data = workflow(
        task(
            "s",
            "SWITCH",
            expression="k",
            inputParameters={"k": "v"},
            decisionCases={
                "yes": [task("a", inputParameters={"x": "${s.output.evaluationResult}"})]
            },
        ),
        task(
            "loop",
            "DO_WHILE",
            loopCondition="$.loop['iteration'] < 2",
            loopOver=[task("b", inputParameters={"i": "${loop.output.iteration}"})],
        ),
    )
    assert issues(data) == []


def test_do_while_body_may_reference_any_task_of_the_same_body() -> None:
    """From the second iteration on, a reference to a later body task (the task
    itself, a task of a parallel branch in the body) reads the previous iteration's:
    nothing to report. Leaving the loop does not make a later task visible."""
    data = workflow(
        task(
            "loop",
            "DO_WHILE",
            loopCondition="${b.output.more}",
            loopOver=[
                task("a", inputParameters={"x": "${b.output}", "self": "${a.output}"}),
                task(
                    "fork",
                    "FORK_JOIN",
                    forkTasks=[[task("c", inputParameters={"d": "${d.output}"})], [task("d")]],
                ),
                task("join", "JOIN", joinOn=["c", "d"]),
                task("b", inputParameters={"x": "${a.output}", "after": "${after.output}"}),
            ],
        ),
        task("after", inputParameters={"x": "${a.output}", "y": "${b__2.output}"}),
    )
    [found] = validate_workflow(data)
    assert (found.path, found.severity) == (
        "$.tasks[0].loopOver[3].inputParameters.after",
        "warning",
    )
    assert "runs later" in found.message


def test_output_parameters_may_reference_any_task() -> None:
    data = workflow(task("a"), outputParameters={"x": "${a.output}", "y": "${zz.output}"})
    assert severities(data) == [("$.outputParameters.y", "warning")]


def test_expression_syntax_error_is_reported_at_the_parameter() -> None:
    path, message = only(
        workflow(task("a", inputParameters={"deep": {"list": ["ok", "${workflow.input.x"]}}))
    )
    assert path == "$.tasks[0].inputParameters.deep.list[1]"
    assert "unclosed" in message


# --- FORK_JOIN / JOIN --------------------------------------------------------------------


def test_join_on_names_a_task_outside_the_fork() -> None:
    data = workflow(
        task("x"),
        task("fork", "FORK_JOIN", forkTasks=[[task("a")], [task("b")]]),
        task("join", "JOIN", joinOn=["a", "x"]),
    )
    path, message = only(data)
    assert path == "$.tasks[2].joinOn[1]"
    assert "'x'" in message and "'fork'" in message


def test_join_must_follow_a_fork_and_fork_needs_a_join() -> None:
    data = workflow(
        task("fork", "FORK_JOIN", forkTasks=[[task("a")]]),
        task("b"),
        task("join", "JOIN", joinOn=["a"]),
    )
    assert paths(data) == ["$.tasks[0]", "$.tasks[2]"]


def test_fork_needs_branches() -> None:
    data = workflow(task("fork", "FORK_JOIN"), task("join", "JOIN"))
    assert paths(data) == ["$.tasks[0].forkTasks"]


# --- per type ----------------------------------------------------------------------------


def test_wait_with_both_duration_and_until() -> None:
    data = workflow(
        task("w", "WAIT", inputParameters={"duration": "5m", "until": "2030-01-01 10:00"})
    )
    assert only(data)[0] == "$.tasks[0].inputParameters"


def test_wait_without_duration_or_until_is_allowed() -> None:
    assert issues(workflow(task("w", "WAIT"))) == []


@pytest.mark.parametrize("duration", ["5 parsecs", "m5", "", "-5s", 1.5, True, -5, {"a": 1}])
def test_wait_invalid_duration(duration: Any) -> None:
    assert only(workflow(task("w", "WAIT", inputParameters={"duration": duration})))[0] == (
        "$.tasks[0].inputParameters.duration"
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("1h 5m", 3900), ("2 days", 172800), ("1d2h3m4s", 93784), ("10 minutes", 600)],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("duration", ["45", 30, "PT1H30M", "P2D", "10m 1h", "1d2h, 3 minutes"])
def test_wait_duration_the_run_reads_registers(duration: Any) -> None:
    """Registration reads a duration with the run's parser: what runs registers (a bare
    number of seconds, ISO 8601, units in any order were refused, yet ran)."""
    parse_duration(duration)  # the run reads it
    assert issues(workflow(task("w", "WAIT", inputParameters={"duration": duration}))) == []


@pytest.mark.parametrize(
    "duration",
    ["99999999999d", "3000000d", "36501d", "P99999999999D", "999999999999999999999999", 10**30],
)
def test_wait_duration_past_the_bound_is_refused_naming_it(duration: Any) -> None:
    """A duration past 100 years registered, then crashed the run arming its timer."""
    path, message = only(workflow(task("w", "WAIT", inputParameters={"duration": duration})))
    assert path == "$.tasks[0].inputParameters.duration"
    assert "at most 36500 days (100 years)" in message


def test_wait_duration_at_the_bound_registers() -> None:
    for duration in ("36500d", MAX_WAIT_SECONDS, f"{MAX_WAIT_SECONDS}s"):
        assert issues(workflow(task("w", "WAIT", inputParameters={"duration": duration}))) == []


@pytest.mark.parametrize(
    "until", ["9999-12-31T23:59:59-14:00", "9999-12-31 23:59 -1400", "2200-01-01T00:00:00Z"]
)
def test_wait_until_past_the_bound_is_refused_naming_it(until: str) -> None:
    path, message = only(workflow(task("w", "WAIT", inputParameters={"until": until})))
    assert path == "$.tasks[0].inputParameters.until"
    assert "at most 36500 days (100 years) from now" in message


@pytest.mark.parametrize("until", ["2030-01-01 10:00 Nowhere/Else", "2030-01-01 10:00 PST"])
def test_wait_until_zone_the_run_cannot_read_is_refused(until: str) -> None:
    """Any word after the time registered; the run knew only UTC/GMT/Z and failed."""
    assert only(workflow(task("w", "WAIT", inputParameters={"until": until})))[0].endswith(".until")


@pytest.mark.parametrize(
    "until",
    [
        "2030-01-01 10:00",
        "2030-01-01T10:00:00Z",
        "2030-01-01 10:00 Europe/Berlin",
        "2030-01-01 10:00 +0200",
        "2030-01-01",
        "0001-01-01T00:00:00Z",
        "${workflow.input.at}",
    ],
)
def test_wait_valid_until(until: str) -> None:
    assert issues(workflow(task("w", "WAIT", inputParameters={"until": until}))) == []


def test_wait_invalid_until() -> None:
    assert only(workflow(task("w", "WAIT", inputParameters={"until": "tomorrow"})))[0].endswith(
        ".until"
    )


@pytest.mark.parametrize(("status", "word"), [(None, "missing"), ("DONE", "DONE")])
def test_terminate_status(status: str | None, word: str) -> None:
    params = {} if status is None else {"terminationStatus": status}
    path, message = only(workflow(task("t", "TERMINATE", inputParameters=params)))
    assert path == "$.tasks[0].inputParameters.terminationStatus"
    assert word in message and "COMPLETED, FAILED or TERMINATED" in message


def test_switch_without_expression() -> None:
    assert (
        only(workflow(task("s", "SWITCH", evaluatorType="value-param")))[0]
        == "$.tasks[0].expression"
    )


def test_switch_unknown_evaluator() -> None:
    path, message = only(workflow(task("s", "SWITCH", evaluatorType="python", expression="x")))
    assert path == "$.tasks[0].evaluatorType"
    assert "value-param" in message and "javascript" in message


@pytest.mark.parametrize("evaluator", ["javascript", "graaljs"])
def test_switch_javascript_evaluators(evaluator: str) -> None:
    assert (
        issues(workflow(task("s", "SWITCH", evaluatorType=evaluator, expression="$.x > 1"))) == []
    )


def test_switch_value_param_names_a_missing_input() -> None:
    data = workflow(
        task("s", "SWITCH", evaluatorType="value-param", expression="${workflow.input.x}")
    )
    assert only(data)[0] == "$.tasks[0].expression"


def test_legacy_decision_with_case_value_param() -> None:
    data = workflow(
        task(
            "d",
            "DECISION",
            caseValueParam="k",
            inputParameters={"k": "${workflow.input.k}"},
            decisionCases={"a": [task("a")]},
        )
    )
    assert issues(data) == []


def test_do_while_needs_condition_and_tasks() -> None:
    assert paths(workflow(task("l", "DO_WHILE"))) == [
        "$.tasks[0].loopCondition",
        "$.tasks[0].loopOver",
    ]


def test_an_empty_loop_condition_is_one_a_do_while_may_have() -> None:
    """Conductor's WorkflowTaskTypeConstraint refuses a DO_WHILE whose loopCondition is
    missing, not one whose condition is empty (its e2e definitions have ``""``)."""
    assert issues(workflow(task("l", "DO_WHILE", loopCondition="", loopOver=[task("a")]))) == []


def test_an_inline_task_definition_without_a_name_is_the_task_s() -> None:
    """Conductor does not validate a workflow task's inline ``taskDefinition``; exported
    definitions leave its name out."""
    inline = {"retryCount": 2, "responseTimeoutSeconds": 30, "timeoutSeconds": 90}
    data = workflow(task("a", name="let_it_poll", taskDefinition=inline))
    assert issues(data) == []
    parsed = WorkflowDef.model_validate(data).tasks[0].task_definition
    assert parsed is not None
    assert (parsed.name, parsed.retry_count, parsed.timeout_seconds) == ("let_it_poll", 2, 90)


def test_sub_workflow_needs_a_name() -> None:
    assert paths(workflow(task("s", "SUB_WORKFLOW"))) == ["$.tasks[0].subWorkflowParam.name"]
    assert paths(workflow(task("s", "SUB_WORKFLOW", subWorkflowParam={"version": 1}))) == [
        "$.tasks[0].subWorkflowParam.name"
    ]


def test_http_needs_a_uri() -> None:
    assert paths(
        workflow(task("h", "HTTP", inputParameters={"http_request": {"method": "GET"}}))
    ) == ["$.tasks[0].inputParameters.http_request.uri"]
    ok = task(
        "h",
        "HTTP",
        inputParameters={"http_request": {"uri": "https://x.example/${workflow.input.id}"}},
    )
    assert issues(workflow(ok)) == []


def test_human_instructions_must_be_a_name_not_a_path() -> None:
    data = workflow(task("h", "HUMAN", inputParameters={"instructions": "../../secrets"}))
    assert paths(data) == ["$.tasks[0].inputParameters.instructions"]


def test_unknown_type_lists_the_known_ones() -> None:
    path, message = only(workflow(task("x", "KAFKA_PUBLISH")))
    assert path == "$.tasks[0].type"
    assert "KAFKA_PUBLISH" in message and "WORKER" in message and "FORK_JOIN_DYNAMIC" in message


def test_simple_is_an_alias_of_worker() -> None:
    assert issues(workflow(task("a", "SIMPLE"))) == []


def test_worker_name_must_be_a_queue_name() -> None:
    path, message = only(workflow(task("a", name="parse pdf")))
    assert path == "$.tasks[0].name"
    assert "queue name" in message


def test_worker_types_need_a_task_definition_when_task_defs_are_given() -> None:
    defs = {"a": TaskDef(name="a")}
    data = workflow(task("a"), task("b"))
    assert issues(data, defs) == [("$.tasks[1].name", "no task definition for WORKER type 'b'")]


def test_inline_task_definition_gets_the_task_def_checks() -> None:
    data = workflow(task("a", taskDefinition={"name": "a", "inputSchema": {"type": 3}}))
    assert paths(data) == ["$.tasks[0].taskDefinition.inputSchema.type"]
    # Conductor relates the timeouts of registered task definitions only
    relaxed = task(
        "a", taskDefinition={"name": "a", "timeoutSeconds": 10, "responseTimeoutSeconds": 20}
    )
    assert paths(workflow(relaxed)) == []


def test_workflow_needs_a_name_tasks_and_schema_version_2() -> None:
    """Conductor's WorkflowDef: ``@NotEmpty`` name and tasks ("WorkflowTask list cannot
    be empty"), ``@Min(2) @Max(2)`` schemaVersion."""
    assert paths({"name": " ", "tasks": []}) == ["$.name", "$.tasks"]
    assert only({"name": "w", "tasks": []}) == ("$.tasks", "WorkflowTask list cannot be empty")
    one = {"name": "n", "taskReferenceName": "n", "type": "SET_VARIABLE"}
    for version in (1, 3):
        path, message = only({"name": "w", "schemaVersion": version, "tasks": [one]})
        assert path == "$.schemaVersion"
        assert message.startswith(f"workflowDef schemaVersion: {version} is only supported")
    assert paths({"name": "w", "schemaVersion": 2, "tasks": [one]}) == []


def test_a_schema_reference_is_accepted_and_its_data_checked() -> None:
    """Conductor's SchemaDef ``{name, version, type}`` names a schema in a registry; only
    a JSON ``data`` in it is a schema to check."""
    assert validate_task_def({"name": "t", "inputSchema": {"name": "t_input", "version": 1}}) == []
    bad = {"name": "t", "inputSchema": {"name": "s", "type": "JSON", "data": {"type": 3}}}
    assert [i.path for i in validate_task_def(bad)] == ["$.inputSchema.data.type"]


def test_new_conductor_task_types() -> None:
    data = workflow(
        task("dyn", "DYNAMIC"),
        task("fan", "FORK_JOIN_DYNAMIC"),
        task("fan_join", "JOIN"),
        task("pick", "EXCLUSIVE_JOIN"),
        task("nothing", "NOOP"),
        task("lambda", "LAMBDA", inputParameters={"scriptExpression": "return 1"}),
        task("spawn", "START_WORKFLOW", inputParameters={"startWorkflow": {"name": "x"}}),
        task("call", "HTTP", inputParameters={"uri": "https://example.com", "method": "GET"}),
    )
    assert paths(data) == [
        "$.tasks[0].dynamicTaskNameParam",
        "$.tasks[1].dynamicForkTasksParam",
        "$.tasks[3].joinOn",
    ]


# --- task definitions --------------------------------------------------------------------


def test_a_valid_task_def() -> None:
    data = {
        "name": "parse_pdf",
        "timeoutSeconds": 300,
        "responseTimeoutSeconds": 120,
        "totalTimeoutSeconds": 900,
        "inputSchema": {"type": "object"},
    }
    assert validate_task_def(data) == []


def test_response_timeout_above_timeout() -> None:
    assert validate_task_def(
        {"name": "t", "timeoutSeconds": 60, "responseTimeoutSeconds": 120}
    ) == [
        ValidationIssue(
            "$.responseTimeoutSeconds",
            "responseTimeoutSeconds (120) must not exceed timeoutSeconds (60)",
        )
    ]
    # timeoutSeconds 0 means no timeout
    assert (
        validate_task_def({"name": "t", "timeoutSeconds": 0, "responseTimeoutSeconds": 120}) == []
    )


def test_timeout_above_total_timeout() -> None:
    found = validate_task_def(
        {
            "name": "t",
            "timeoutSeconds": 600,
            "responseTimeoutSeconds": 60,
            "totalTimeoutSeconds": 300,
        }
    )
    assert [i.path for i in found] == ["$.timeoutSeconds"]
    assert (
        validate_task_def({"name": "t", "timeoutSeconds": 600, "responseTimeoutSeconds": 60}) == []
    )


@pytest.mark.parametrize(
    "name",
    [
        "",
        "has space",
        ".dot_first",
        "dash_last-",
        "slash/name",
        "x" * (MAX_TASK_TYPE_LENGTH + 1),
        "parse-high",
    ],
)
def test_invalid_queue_names(name: str) -> None:
    assert queue_name_problem(name) is not None
    assert [i.path for i in validate_task_def({"name": name})] == ["$.name"]


@pytest.mark.parametrize("name", ["a", "parse_pdf", "v1.parse-pdf", "x" * MAX_TASK_TYPE_LENGTH])
def test_valid_queue_names(name: str) -> None:
    assert queue_name_problem(name) is None


def test_max_task_type_length_leaves_room_for_suffix_and_domain() -> None:
    assert MAX_TASK_TYPE_LENGTH + len("-high") <= 260
    assert MAX_DOMAIN_LENGTH + 1 + MAX_TASK_TYPE_LENGTH <= 260


def test_validator_and_catalog_agree_on_task_type_names() -> None:
    longest = "x" * MAX_TASK_TYPE_LENGTH
    assert queue_name_problem(longest) is None
    assert queue_name_problem(longest + "x") is not None
    catalog_entry = {"name": "area", "taskTypes": [longest], "image": "img:1"}
    WorkerCatalogEntry.model_validate(catalog_entry)
    with pytest.raises(ValueError):
        WorkerCatalogEntry.model_validate({**catalog_entry, "taskTypes": [longest + "x"]})


def test_invalid_json_schemas() -> None:
    found = validate_task_def(
        {
            "name": "t",
            "inputSchema": {"type": "nope"},
            "outputSchema": {"properties": {"a": {"type": 3}}},
        }
    )
    assert [i.path for i in found] == ["$.inputSchema.type", "$.outputSchema.properties.a.type"]


def test_schema_dialect_follows_dollar_schema() -> None:
    draft4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "minimum": 1,
        "exclusiveMinimum": True,
    }
    assert validate_task_def({"name": "t", "inputSchema": draft4}) == []
    latest = {"minimum": 1, "exclusiveMinimum": True}
    assert [i.path for i in validate_task_def({"name": "t", "inputSchema": latest})] == [
        "$.inputSchema.exclusiveMinimum"
    ]
    unknown = {"$schema": "https://example.com/my-dialect"}
    assert [i.path for i in validate_task_def({"name": "t", "inputSchema": unknown})] == [
        "$.inputSchema.$schema"
    ]


# --- coverage ----------------------------------------------------------------------------


def test_check_coverage() -> None:
    wf = WorkflowDef.model_validate(
        workflow(
            task("a", name="covered"),
            task("b", name="no_def"),
            task("c", name="no_worker"),
            task("d", name="neither"),
            task("e", name="no_def"),
            task("h", "HTTP", inputParameters={"http_request": {"uri": "https://x"}}),
        )
    )
    defs = {n: TaskDef(name=n) for n in ("covered", "no_worker")}
    catalog = [
        WorkerCatalogEntry.model_validate(
            {"name": "area", "taskTypes": ["covered", "no_def"], "image": "img"}
        )
    ]
    found = check_coverage([wf], defs, catalog)
    assert [i.path for i in found] == ["$.tasks[1].name", "$.tasks[2].name", "$.tasks[3].name"]
    no_def, no_worker, neither = (i.message for i in found)
    assert (
        "'no_def'" in no_def
        and "no task definition" in no_def
        and "workers/area/taskdefs" in no_def
    )
    assert "'no_worker'" in no_worker and "no worker in the catalog" in no_worker
    assert "no task definition" in neither and "no worker" in neither
    assert (
        check_coverage(
            [wf],
            {n: TaskDef(name=n) for n in ("covered", "no_def", "no_worker", "neither")},
            [
                catalog[0].model_copy(
                    update={"task_types": ["covered", "no_def", "no_worker", "neither"]}
                )
            ],
        )
        == []
    )


# --- all at once, never a crash ----------------------------------------------------------


def test_all_semantic_errors_come_back_at_once() -> None:
    data = workflow(
        task("parse", inputParameters={"x": "${later.output}"}),
        task("parse", name="again"),
        task("w", "WAIT", inputParameters={"duration": "soon"}),
        task("t", "TERMINATE", inputParameters={"terminationStatus": "OK"}),
        task(
            "s",
            "SWITCH",
            evaluatorType="value-param",
            expression="k",
            inputParameters={"k": 1},
            decisionCases={"yes": [task("h", "HTTP")]},
        ),
        task("later", "NOPE"),
    )
    assert paths(data) == [
        "$.tasks[1].taskReferenceName",
        "$.tasks[0].inputParameters.x",
        "$.tasks[2].inputParameters.duration",
        "$.tasks[3].inputParameters.terminationStatus",
        "$.tasks[4].decisionCases.yes[0].inputParameters.uri",
        "$.tasks[5].type",
    ]


def test_unknown_conductor_fields_are_ignored() -> None:
    """Fields Stepway does not know or does not act on never refuse a definition (the
    ones that change how a run goes are also warnings:
    test_conductor_fields_stepway_does_not_act_on_are_warnings)."""
    data = workflow(
        task(
            "a",
            rateLimited=True,
            taskToDomain={"a": "x"},
            permissive=False,
            onStateChange={"x": [1]},
            cacheConfig={"key": "k", "ttlInSeconds": 10},
        ),
        task("f", "FORK_JOIN", forkTasks=[[task("b", extraThing=None)]]),
        task("j", "JOIN", joinOn=["b"], expression=None),
        accessPolicy={},
        workflowStatusListenerSink="x",
        maskedFields=["a"],
        createTime=1700000000000,
    )
    assert errors_only(validate_workflow(data, None)) == []
    assert [i.path for i in validate_workflow(data, None)] == [
        "$.tasks[0].onStateChange",
        "$.tasks[0].cacheConfig",
    ]


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=10)
    | st.sampled_from(
        ["${", "${a.output}", "${workflow.input.x}", "WORKER", "SWITCH", "JOIN", "FORK_JOIN"]
    ),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "name",
                    "taskReferenceName",
                    "type",
                    "tasks",
                    "inputParameters",
                    "forkTasks",
                    "decisionCases",
                    "defaultCase",
                    "loopOver",
                    "joinOn",
                    "expression",
                    "evaluatorType",
                    "taskDefinition",
                    "subWorkflowParam",
                    "duration",
                    "x",
                ]
            ),
            children,
            max_size=6,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_never_crashes_on_arbitrary_json(data: Any) -> None:
    for issue in validate_workflow(data):
        assert issue.path.startswith("$")
    for issue in validate_task_def(data):
        assert issue.path.startswith("$")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.fixed_dictionaries(
            {
                "name": st.sampled_from(["a", "b"]),
                "taskReferenceName": st.sampled_from(["a", "b", "c", "d"]),
                "type": st.sampled_from(
                    [
                        "WORKER",
                        "SWITCH",
                        "FORK_JOIN",
                        "JOIN",
                        "DO_WHILE",
                        "WAIT",
                        "TERMINATE",
                        "HTTP",
                        "HUMAN",
                        "SUB_WORKFLOW",
                        "SET_VARIABLE",
                        "X",
                    ]
                ),
                "inputParameters": st.dictionaries(
                    st.sampled_from(["p", "duration", "until", "http_request"]),
                    st.sampled_from(["${a.output}", "${", "1m", 3, {"uri": 1}]),
                    max_size=3,
                ),
            },
            optional={
                "joinOn": st.lists(st.sampled_from(["a", "b", "z"])),
                "loopCondition": st.just("${c.output}"),
            },
        ),
        max_size=6,
    )
)
def test_never_crashes_on_structurally_valid_workflows(tasks: list[dict[str, Any]]) -> None:
    validate_workflow(workflow(*tasks))


# --- large definitions ------------------------------------------------------------------


def _chain(n: int, root: str) -> dict[str, Any]:
    """``n`` SET_VARIABLE tasks, each referencing ``<root><i>``."""
    return {
        "name": "large",
        "tasks": [
            {
                "name": f"t{i}",
                "taskReferenceName": f"r{i}",
                "type": "SET_VARIABLE",
                "inputParameters": {"x": f"${{{root}{i}.output.y}}"},
            }
            for i in range(n)
        ],
    }


@pytest.mark.timeout(60)
def test_a_definition_of_20000_tasks_each_with_an_unknown_reference_is_checked_at_once() -> None:
    """Every task copied the set of refs seen so far (n^2: 20,000 tasks took 12 s), and
    every unknown reference compared its name with every ref for a hint (3,000 of them
    took 12 s; 20,000 would take hours): each task of the chain is reported, without a
    hint past the first 20 or in so large a definition."""
    issues = validate_workflow(_chain(20_000, "missing"))
    assert len(issues) == 20_000
    assert issues[-1].path == "$.tasks[19999].inputParameters.x"
    assert "references 'missing19999', which is not a task" in issues[-1].message
    assert not any("did you mean" in issue.message for issue in issues)
    # references to earlier tasks are fine, however many
    chained = _chain(20_000, "r")
    chained["tasks"][0]["inputParameters"] = {}
    for i, task in enumerate(chained["tasks"][1:], start=1):
        task["inputParameters"] = {"x": f"${{r{i - 1}.output.y}}"}
    assert validate_workflow(chained) == []


def test_hints_are_given_for_the_first_20_unknown_references() -> None:
    definition = _chain(30, "r_")
    messages = [issue.message for issue in validate_workflow(definition)]
    assert len(messages) == 30
    assert all("did you mean 'r" in m for m in messages[:20]), messages[:20]
    assert not any("did you mean" in m for m in messages[20:]), messages[20:]


def test_a_do_while_input_may_read_the_loop_and_its_body() -> None:
    """Conductor resolves a DO_WHILE's inputParameters for its loopCondition after each
    iteration: conductor-oss's scheduler example and cookbook loops write
    ``"iteration": "${poll_loop.output.iteration}"`` and ``"sufficient":
    "${grade.output.result}"`` (a body task) with a condition on ``$.iteration`` /
    ``$.sufficient``. Nothing to report; a task after the loop is still a later one."""
    data = workflow(
        task(
            "poll_loop",
            "DO_WHILE",
            loopCondition="$.iteration < 3 && !$.sufficient",
            inputParameters={
                "iteration": "${poll_loop.output.iteration}",
                "sufficient": "${grade.output.result}",
                "deep": "${inner_step.output}",
                "late": "${after.output}",
            },
            loopOver=[
                task("fetch"),
                task("grade", "INLINE", inputParameters={}),
                task(
                    "inner",
                    "DO_WHILE",
                    loopCondition="false",
                    loopOver=[task("inner_step")],
                ),
            ],
        ),
        task("after"),
    )
    [found] = validate_workflow(data)
    assert (found.path, found.severity) == ("$.tasks[0].inputParameters.late", "warning")


def test_json_jq_transform_needs_a_query_expression_as_in_conductor() -> None:
    """Conductor's isJSONJQTransformTaskValid: queryExpression in inputParameters, or in
    the inputTemplate of the task definition the task runs with."""
    bare = workflow(task("jq", "JSON_JQ_TRANSFORM", inputParameters={"x": 1}))
    path, message = only(bare)
    assert path == "$.tasks[0].inputParameters.queryExpression"
    assert "JSON_JQ_TRANSFORM needs inputParameters.queryExpression" in message
    inline = workflow(
        task(
            "jq",
            "JSON_JQ_TRANSFORM",
            taskDefinition={"name": "jq", "inputTemplate": {"queryExpression": ".x"}},
        )
    )
    assert issues(inline) == []
    registered = {
        "jq": TaskDef.model_validate({"name": "jq", "inputTemplate": {"queryExpression": ".x"}})
    }
    assert validate_workflow(bare, registered, require_task_defs=False) == []


def test_a_registered_templates_count_without_requiring_task_definitions() -> None:
    """Without strict task definitions the registered ones still give an HTTP task its
    http_request template (the engine fills the input from it), and a WORKER type needs
    none: it runs with Conductor's default task definition, which is worth a warning."""
    data = workflow(task("call", "HTTP", name="templated_http"), task("w", "WORKER"))
    registered = {
        "templated_http": TaskDef.model_validate(
            {"name": "templated_http", "inputTemplate": {"http_request": {"uri": "http://x"}}}
        )
    }
    [optional] = validate_workflow(data, registered, require_task_defs=False)
    assert (optional.path, optional.severity) == ("$.tasks[1].name", "warning")
    assert "runs with Conductor's default" in optional.message
    [strict] = validate_workflow(data, registered)
    assert strict.path == "$.tasks[1].name" and "no task definition" in strict.message
    assert [i.path for i in validate_workflow(data)] == ["$.tasks[0].inputParameters.uri"]


def test_a_secret_outside_an_http_request_is_a_warning() -> None:
    """A secret is revealed only in an HTTP task's uri, headers or body; anywhere else
    it stays its text (a worker gets the literal): worth a warning, as is a computed
    name, which reads null."""
    data = workflow(
        task(
            "call",
            "HTTP",
            inputParameters={
                "http_request": {
                    "uri": "https://api.example.com/x?k=${workflow.secrets.K}",
                    "headers": {"Authorization": "Bearer ${workflow.secrets.T}"},
                    "body": {"nested": ["${workflow.secrets.T}"]},
                },
                "note": "${workflow.secrets.T}",
            },
        ),
        task(
            "flat",
            "HTTP",
            inputParameters={"uri": "https://a.b/", "headers": {"X": "${workflow.secrets.T}"}},
        ),
        task(
            "w",
            inputParameters={
                "p": "${workflow.secrets.T}",
                "q": "${workflow.secrets.${workflow.input.n}}",
            },
        ),
    )
    found = [(i.path, i.severity) for i in validate_workflow(data)]
    assert found == [
        ("$.tasks[0].inputParameters.note", "warning"),
        ("$.tasks[2].inputParameters.p", "warning"),
        ("$.tasks[2].inputParameters.q", "warning"),
    ]


def test_without_warnings_only_errors_are_looked_for() -> None:
    """A start with an inline definition wants errors only: no warning, and no task
    definition read for one (the registered ones are read from the run store)."""
    asked: list[str] = []

    class Lookup:
        def get(self, name: str, /) -> TaskDef | None:
            asked.append(name)
            return None

    data = workflow(task("w"), outputParameters={"x": "${gone.output}"})
    assert validate_workflow(data, Lookup(), require_task_defs=False, warnings=False) == []
    assert asked == []
    found = validate_workflow(data, Lookup(), require_task_defs=False)
    assert [(i.path, i.severity) for i in found] == [
        ("$.tasks[0].name", "warning"),
        ("$.outputParameters.x", "warning"),
    ]
    assert asked == ["w"]


def test_conductor_fields_stepway_does_not_act_on_are_warnings() -> None:
    """onStateChange and cacheConfig are kept but not acted on: the definition registers
    (warnings only), and each names its field and what happens instead. Their empty
    values (what an export carries) say nothing; asyncComplete and permissive, which
    Stepway acts on, say nothing either."""
    data = workflow(
        task("call", "HTTP", inputParameters={"uri": "https://example.com"}, asyncComplete=True),
        task("work", permissive=True, onStateChange={"onFailed": [{"type": "q"}]}),
        task("cached", cacheConfig={"key": "${workflow.input.k}", "ttlInSecond": 60}),
        task(
            "quiet",
            "INLINE",
            inputParameters={"evaluatorType": "javascript", "expression": "1"},
            asyncComplete=True,
            permissive=False,
            onStateChange={},
            cacheConfig=None,
        ),
        task("lenient", permissive=True, optional=True),
    )
    found = validate_workflow(data, None)
    assert errors_only(found) == []
    assert [(i.path, i.severity) for i in found] == [
        ("$.tasks[1].onStateChange", "warning"),
        ("$.tasks[2].cacheConfig", "warning"),
    ]
    assert "no event is published" in found[0].message
    # a start with an inline definition looks for errors only
    assert validate_workflow(data, None, warnings=False) == []


@pytest.mark.parametrize(
    ("given", "expected"),
    [(7, 7), ("12", 12), (0, 0), (None, 3), (100, 3), (-1, 3), (True, 3), ("${x}", 3)],
)
def test_a_sub_workflow_params_priority_is_the_childs_when_it_is_one(
    given: object, expected: int
) -> None:
    """Conductor's SubWorkflowParams.priority (0-99) sets the child run's priority; a value
    that is none (an unresolved expression, out of range) leaves the parent's (3)."""
    param = SubWorkflowParams.model_validate({"name": "child", "priority": given})
    assert param.child_priority(3) == expected
