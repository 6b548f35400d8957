"""Loading definition files from disk for offline validation and registration.

A file holds one workflow definition, one task definition, or a list of definitions (a
list of task definitions is Conductor's ``POST /api/metadata/taskdefs`` body; a list of
workflow definitions is the ``PUT /api/metadata/workflow`` body). Each object is
classified by its shape: a ``tasks`` key makes it a workflow definition, anything else is
a task definition. JSON files (``.json``) and YAML files (``.yaml``/``.yml``) are read
when named directly; folders are walked recursively for ``*.json`` only, so that
``worker.yaml`` catalog files and other YAML next to the definitions are left alone.
Hidden folders, ``__pycache__``, ``node_modules`` and virtual environments are skipped.

Nothing here raises on bad content: unreadable or malformed files become
:class:`SourceIssue` values (with line and column for syntax errors).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from engine.language.validation import Severity, ValidationIssue, severity_mark

__all__ = [
    "DefinitionItem",
    "LoadResult",
    "SourceIssue",
    "discover",
    "load_file",
    "load_paths",
]

Kind = Literal["workflow", "taskdef"]

_YAML_SUFFIXES = (".yaml", ".yml")
_SKIP_DIRS = frozenset({"__pycache__", "node_modules", "venv", ".venv", "site-packages"})


@dataclass(frozen=True)
class SourceIssue:
    """A problem in a file: ``<source>: <path>: <message>``."""

    source: Path
    path: str
    message: str
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def __str__(self) -> str:
        return f"{self.source}: {self.path}: {severity_mark(self.severity)}{self.message}"

    @classmethod
    def of(cls, source: Path, issue: ValidationIssue, prefix: str = "$") -> SourceIssue:
        """``issue`` of the item at ``prefix`` (``$`` or ``$[2]``) of ``source``."""
        return cls(source, prefix + issue.path[1:], issue.message, issue.severity)


@dataclass(frozen=True)
class DefinitionItem:
    """One definition found in a file; ``path`` is where it sits in the file."""

    source: Path
    kind: Kind
    path: str
    data: dict[str, Any]

    def issue(self, issue: ValidationIssue) -> SourceIssue:
        """An issue of this item's document, located in the file."""
        return SourceIssue.of(self.source, issue, self.path)


@dataclass
class LoadResult:
    items: list[DefinitionItem] = field(default_factory=list)
    issues: list[SourceIssue] = field(default_factory=list)

    def extend(self, other: LoadResult) -> None:
        self.items += other.items
        self.issues += other.issues


def discover(paths: Iterable[Path]) -> tuple[list[Path], list[SourceIssue]]:
    """The definition files named by ``paths`` (files as given, folders walked)."""
    files: list[Path] = []
    issues: list[SourceIssue] = []
    seen: set[Path] = set()

    def add(path: Path) -> None:
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            files.append(path)

    for path in paths:
        if path.is_dir():
            for found in sorted(path.rglob("*.json")):
                relative = found.relative_to(path).parts[:-1]
                if any(part.startswith(".") or part in _SKIP_DIRS for part in relative):
                    continue
                if found.is_file():
                    add(found)
        elif path.is_file():
            add(path)
        else:
            issues.append(SourceIssue(path, "$", "no such file or directory"))
    return files, issues


def _parse(path: Path, text: str) -> tuple[Any, SourceIssue | None]:
    if path.suffix.lower() in _YAML_SUFFIXES:
        try:
            return yaml.safe_load(text), None
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            return None, SourceIssue(path, "$", f"invalid YAML{where}: {exc.problem}")
        except yaml.YAMLError as exc:
            return None, SourceIssue(path, "$", f"invalid YAML: {exc}")
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, SourceIssue(
            path, "$", f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        )


def _classify(data: dict[str, Any]) -> Kind:
    return "workflow" if "tasks" in data else "taskdef"


def load_file(path: Path) -> LoadResult:
    """The definitions in one file, or the reason there are none."""
    result = LoadResult()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        result.issues.append(SourceIssue(path, "$", f"cannot read: {exc}"))
        return result
    data, problem = _parse(path, text)
    if problem is not None:
        result.issues.append(problem)
    elif isinstance(data, dict):
        result.items.append(DefinitionItem(path, _classify(data), "$", data))
    elif isinstance(data, list):
        for i, element in enumerate(data):
            if isinstance(element, dict):
                result.items.append(DefinitionItem(path, _classify(element), f"$[{i}]", element))
            else:
                result.issues.append(
                    SourceIssue(
                        path,
                        f"$[{i}]",
                        "expected a task definition or workflow definition object",
                    )
                )
    else:
        result.issues.append(
            SourceIssue(
                path,
                "$",
                "expected a workflow definition, a task definition or a list of "
                "task definitions (a JSON object or array)",
            )
        )
    return result


def load_paths(paths: Iterable[Path]) -> LoadResult:
    """Every definition in the files and folders ``paths``, in a stable order."""
    files, issues = discover(paths)
    result = LoadResult(issues=issues)
    for path in files:
        result.extend(load_file(path))
    return result
