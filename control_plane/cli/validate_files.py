"""The checks behind ``stepway validate PATH...``: validate definition files offline.

Prints one line per problem, ``file: path: message``, and exits 1; prints nothing and
exits 0 when everything is valid. Task definitions are resolved across all the given
files, so a workflow in ``definitions/`` is checked against the task definitions in
``workers/*/taskdefs/``. Coverage (every WORKER type used has a task definition and a
worker in the catalog, ``workers/*/worker.yaml``) is checked unless ``--no-coverage``.
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import ValidationError

from engine.language.definitions import TaskDef, TaskType, WorkflowDef
from engine.language.loading import DefinitionItem, SourceIssue, load_paths
from engine.language.recursion import recursion_issues
from engine.language.validation import (
    ValidationIssue,
    check_coverage,
    validate_task_def,
    validate_workflow,
)

__all__ = ["INSTRUCTIONS_DIR", "run_validation"]

#: Instruction texts of HUMAN tasks: ``<folder of the workflow>/instructions/<name>.md``.
INSTRUCTIONS_DIR = "instructions"


def _task_defs(items: list[DefinitionItem], issues: list[SourceIssue]) -> dict[str, TaskDef]:
    found: dict[str, TaskDef] = {}
    where: dict[str, DefinitionItem] = {}  # lowercased name -> first definition
    for item in items:
        problems = validate_task_def(item.data)
        issues += [item.issue(problem) for problem in problems]
        try:
            td = TaskDef.model_validate(item.data)
        except ValidationError:
            continue
        first = where.get(td.name.lower())
        if first is not None:
            same = "" if first.data.get("name") == td.name else " (queue names ignore case)"
            issues.append(
                item.issue(
                    ValidationIssue(
                        "$.name",
                        f"task definition {td.name!r} is also defined in "
                        f"{first.source} at {first.path}{same}",
                    )
                )
            )
            continue
        where[td.name.lower()] = item
        found[td.name] = td
    return found


def _instruction_issues(item: DefinitionItem, wf: WorkflowDef) -> list[SourceIssue]:
    folder = item.source.parent / INSTRUCTIONS_DIR
    issues: list[SourceIssue] = []
    for location in wf.walk():
        task = location.task
        if task.type != TaskType.HUMAN:
            continue
        name = task.input_parameters.get("instructions")
        if not isinstance(name, str) or "${" in name or "/" in name or "\\" in name:
            continue  # not a literal name; validate_workflow reports bad names
        if not (folder / f"{name}.md").is_file():
            issues.append(
                item.issue(
                    ValidationIssue(
                        location.path + ".inputParameters.instructions",
                        f"instruction text {name!r} not found: expected {folder / name}.md",
                    )
                )
            )
    return issues


def run_validation(
    paths: list[Path], catalog_dir: Path | None = None, coverage: bool = True
) -> list[SourceIssue]:
    """Every problem of the definitions under ``paths``, grouped by file."""
    loaded = load_paths(paths)
    issues = list(loaded.issues)
    task_defs = _task_defs([i for i in loaded.items if i.kind == "taskdef"], issues)

    workflows: list[tuple[DefinitionItem, WorkflowDef]] = []
    seen: dict[tuple[str, int], DefinitionItem] = {}
    for item in (i for i in loaded.items if i.kind == "workflow"):
        issues += [item.issue(problem) for problem in validate_workflow(item.data)]
        try:
            wf = WorkflowDef.model_validate(item.data)
        except ValidationError:
            continue
        key = (wf.name, wf.version)
        if key in seen:
            first = seen[key]
            issues.append(
                item.issue(
                    ValidationIssue(
                        "$.name",
                        f"workflow {wf.name!r} version {wf.version} is also defined in "
                        f"{first.source} at {first.path}",
                    )
                )
            )
        else:
            seen[key] = item
        issues += _instruction_issues(item, wf)
        workflows.append((item, wf))

    # definitions that can start themselves among the files given
    found = recursion_issues([wf for _, wf in workflows], {})
    for index, problems in found.items():
        issues += [workflows[index][0].issue(problem) for problem in problems]

    if coverage and workflows:
        issues += _coverage(workflows, task_defs, catalog_dir or Path.cwd() / "workers")

    return sorted(issues, key=_sort_key)


def _sort_key(issue: SourceIssue) -> tuple[str, list[tuple[int, str]]]:
    """By file, then by path in document order (``tasks[2]`` before ``tasks[10]``)."""
    parts = re.split(r"(\d+)", issue.path)
    return str(issue.source), [(int(p), "") if p.isdigit() else (-1, p) for p in parts]


def _coverage(
    workflows: list[tuple[DefinitionItem, WorkflowDef]],
    task_defs: dict[str, TaskDef],
    catalog_dir: Path,
) -> list[SourceIssue]:
    # The catalog module stays free of engine imports (the Pulumi program reads it).
    from workers.catalog import CatalogError, load_catalog

    try:
        catalog = load_catalog(catalog_dir)
    except CatalogError as exc:
        # The message starts with the file it is about: "<file>: <problem>".
        source, _, problem = str(exc).partition(": ")
        if not problem or not (source.startswith(str(catalog_dir)) or Path(source).exists()):
            source, problem = str(catalog_dir), str(exc)
        hint = " (give --catalog DIR, or --no-coverage to skip coverage)"
        return [SourceIssue(Path(source), "$", problem + hint)]
    issues: list[SourceIssue] = []
    for item, wf in workflows:
        issues += [item.issue(p) for p in check_coverage([wf], task_defs, catalog)]
    return issues
