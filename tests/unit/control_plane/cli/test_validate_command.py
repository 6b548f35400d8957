"""``stepway validate``: silent on the examples, every error of the broken set listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from control_plane.cli.main import app

ROOT = Path(__file__).resolve().parents[4]
BROKEN = Path("tests/data/broken")


def run(*args: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, ["validate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output.splitlines()


def located(lines: list[str]) -> list[tuple[str, str]]:
    """(file, path) of each output line."""
    pairs = []
    for line in lines:
        file, path, _message = line.split(": ", 2)
        pairs.append((file, path))
    return pairs


@pytest.fixture(autouse=True)
def _in_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def test_examples_are_valid_and_print_nothing() -> None:
    assert run("definitions", "workers") == (0, [])


def test_examples_are_valid_with_an_explicit_catalog() -> None:
    assert run("definitions", "workers", "--catalog", str(ROOT / "workers")) == (0, [])


def test_every_example_task_type_is_defined_and_in_the_catalog() -> None:
    from workers.catalog import load_catalog

    catalog_types = {t for entry in load_catalog(ROOT / "workers") for t in entry.task_types}
    defined = {p.stem for p in ROOT.glob("workers/*/taskdefs/*.json")}
    for name in defined:
        assert (
            json.loads((next(ROOT.glob(f"workers/*/taskdefs/{name}.json"))).read_text())["name"]
            == name
        )
    assert defined == catalog_types


def test_broken_folder_lists_every_error_with_file_and_path() -> None:
    code, lines = run(str(BROKEN), "--no-coverage")
    assert code == 1
    semantics = str(BROKEN / "bad_semantics.json")
    structure = str(BROKEN / "bad_structure.json")
    taskdefs = str(BROKEN / "taskdefs.json")
    assert located(lines) == [
        (semantics, "$.tasks[0].inputParameters.text"),
        (semantics, "$.tasks[0].inputParameters.url"),
        (semantics, "$.tasks[2].taskReferenceName"),
        (semantics, "$.tasks[3].forkTasks[1][0].inputParameters.feed"),
        (semantics, "$.tasks[4].joinOn[1]"),
        (semantics, "$.tasks[5].inputParameters"),
        (semantics, "$.tasks[5].inputParameters.duration"),
        (semantics, "$.tasks[6].inputParameters.instructions"),
        (semantics, "$.tasks[7].inputParameters.terminationStatus"),
        (semantics, "$.tasks[8].evaluatorType"),
        (semantics, "$.tasks[9].loopCondition"),
        (semantics, "$.tasks[9].loopOver"),
        (semantics, "$.tasks[10].subWorkflowParam.name"),
        (semantics, "$.tasks[11].inputParameters.http_request.uri"),
        (semantics, "$.tasks[12]"),
        (semantics, "$.tasks[12].dynamicForkTasksParam"),
        (semantics, "$.tasks[13].name"),
        (structure, "$.tasks[0].retryCount"),
        (structure, "$.tasks[1].taskReferenceName"),
        (structure, "$.timeoutPolicy"),
        (str(BROKEN / "malformed.json"), "$"),
        (str(BROKEN / "not_a_definition.json"), "$"),
        (taskdefs, "$[0].responseTimeoutSeconds"),
        (taskdefs, "$[1].timeoutSeconds"),
        (taskdefs, "$[2].name"),
        (taskdefs, "$[3].inputSchema.type"),
        (taskdefs, "$[3].outputSchema.$schema"),
        (taskdefs, "$[4].retryLogic"),
        (taskdefs, "$[6].name"),
    ]
    text = "\n".join(lines)
    assert "invalid JSON at line 4, column 18" in text
    assert "'TIME_OUT_WF' or 'ALERT_ONLY' (got 'NEVER')" in text
    assert "duplicate taskReferenceName 'classify': already used at $.tasks[1]" in text
    assert "instruction text 'no_such_text' not found" in text
    assert "'Dup_Type' is also defined in" in text


def test_coverage_errors_name_the_type_and_what_is_missing() -> None:
    code, lines = run(
        str(BROKEN / "uncovered.json"), str(BROKEN / "uncovered_taskdefs.json"), "workers"
    )
    assert code == 1
    uncovered = str(BROKEN / "uncovered.json")
    assert located(lines) == [(uncovered, "$.tasks[1].name"), (uncovered, "$.tasks[2].name")]
    assert "'ghost_task'" in lines[0]
    assert "no task definition and no worker in the catalog" in lines[0]
    assert "'uncovered_type'" in lines[1]
    assert "has a task definition but no worker in the catalog" in lines[1]


def test_workflow_without_its_task_defs_fails_coverage_unless_skipped() -> None:
    code, lines = run("definitions")
    assert code == 1
    assert all("has no task definition" in line for line in lines)
    assert {line.split("'")[1] for line in lines} == {
        "parse_pdf",
        "classify_document",
        "lodge_return",
        "fetch_bank_feed",
        "bulk_export",
        "reconcile_ledger",
    }
    assert run("definitions", "--no-coverage") == (0, [])


def test_missing_catalog_is_an_error(tmp_path: Path) -> None:
    code, lines = run("definitions", "workers", "--catalog", str(tmp_path / "nowhere"))
    assert code == 1
    assert len(lines) == 1
    assert lines[0].startswith(f"{tmp_path / 'nowhere'}: $: ")
    assert "--no-coverage" in lines[0]


def test_catalog_from_another_folder(tmp_path: Path) -> None:
    area = tmp_path / "custom"
    area.mkdir()
    (area / "worker.yaml").write_text("name: custom\ntaskTypes: [custom_task]\nimage: img\n")
    (tmp_path / "custom_task.json").write_text(json.dumps({"name": "custom_task"}))
    (tmp_path / "wf.json").write_text(
        json.dumps({"name": "wf", "tasks": [{"name": "custom_task", "taskReferenceName": "a"}]})
    )
    assert run(str(tmp_path), "--catalog", str(tmp_path)) == (0, [])


def test_missing_path(tmp_path: Path) -> None:
    code, lines = run(str(tmp_path / "nope.json"))
    assert code == 1
    assert lines == [f"{tmp_path / 'nope.json'}: $: no such file or directory"]


def test_yaml_files_named_directly_are_read_but_folders_only_yield_json(tmp_path: Path) -> None:
    (tmp_path / "wf.yaml").write_text(
        "name: wf\ntasks:\n  - name: w\n    taskReferenceName: w\n    type: WAIT\n"
        "    inputParameters: {duration: soon}\n"
    )
    (tmp_path / "worker.yaml").write_text("name: not a definition\n")
    assert run(str(tmp_path), "--no-coverage") == (0, [])
    code, lines = run(str(tmp_path / "wf.yaml"), "--no-coverage")
    assert code == 1
    assert located(lines) == [(str(tmp_path / "wf.yaml"), "$.tasks[0].inputParameters.duration")]
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    code, lines = run(str(tmp_path / "bad.yaml"))
    assert code == 1
    assert "invalid YAML at line 2" in lines[0]


def test_a_list_of_task_definitions_and_a_list_of_workflows(tmp_path: Path) -> None:
    (tmp_path / "defs.json").write_text(
        json.dumps(
            [{"name": "a"}, {"name": "wf", "tasks": [{"name": "a", "taskReferenceName": "x"}]}, 3]
        )
    )
    code, lines = run(str(tmp_path), "--no-coverage")
    assert code == 1
    assert located(lines) == [(str(tmp_path / "defs.json"), "$[2]")]


def test_duplicate_workflow_versions_across_files(tmp_path: Path) -> None:
    body = {"name": "wf", "tasks": [{"name": "w", "taskReferenceName": "w", "type": "WAIT"}]}
    (tmp_path / "a.json").write_text(json.dumps(body))
    (tmp_path / "b.json").write_text(json.dumps(body))
    code, lines = run(str(tmp_path), "--no-coverage")
    assert code == 1
    assert located(lines) == [(str(tmp_path / "b.json"), "$.name")]
    assert "version 1 is also defined in" in lines[0]


def test_definitions_that_start_each_other_are_reported(tmp_path: Path) -> None:
    def sub(name: str, child: str) -> dict[str, object]:
        return {
            "name": name,
            "tasks": [
                {
                    "name": "child",
                    "taskReferenceName": "child",
                    "type": "SUB_WORKFLOW",
                    "subWorkflowParam": {"name": child},
                }
            ],
        }

    (tmp_path / "ping.json").write_text(json.dumps(sub("ping", "pong")))
    (tmp_path / "pong.json").write_text(json.dumps(sub("pong", "ping")))
    code, lines = run(str(tmp_path), "--no-coverage")
    assert code == 1
    assert located(lines) == [
        (str(tmp_path / "ping.json"), "$.tasks[0].subWorkflowParam.name"),
        (str(tmp_path / "pong.json"), "$.tasks[0].subWorkflowParam.name"),
    ]
    assert "workflow 'ping' can start itself (ping -> pong -> ping)" in lines[0]


def test_warnings_are_printed_and_fail_only_with_strict(tmp_path: Path) -> None:
    """A reference Conductor accepts (a later task, a task the workflow does not have in
    its outputParameters) is a warning: printed, exit 0; --strict fails on it."""
    (tmp_path / "wf.json").write_text(
        json.dumps(
            {
                "name": "wf",
                "tasks": [
                    {
                        "name": "w",
                        "taskReferenceName": "w",
                        "type": "WAIT",
                        "inputParameters": {"note": "${later.output}"},
                    },
                    {"name": "later", "taskReferenceName": "later", "type": "NOOP"},
                ],
                "outputParameters": {"x": "${gone.output}"},
            }
        )
    )
    code, lines = run(str(tmp_path), "--no-coverage")
    assert code == 0
    assert located(lines) == [
        (str(tmp_path / "wf.json"), "$.outputParameters.x"),
        (str(tmp_path / "wf.json"), "$.tasks[0].inputParameters.note"),
    ]
    assert all(line.split(": ", 2)[2].startswith("warning: ") for line in lines)
    assert run(str(tmp_path), "--no-coverage", "--strict") == (1, lines)
