"""Registering task definitions (with their queues) and workflow definitions.

Everything is validated first and reported at once (400 with a path per problem);
then the queues are provisioned; then the definitions are stored. A dry run computes
the same plan (what would be created, updated or left unchanged, queues included)
and writes nothing.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError

from control_plane.api.errors import ApiError, conflict, not_found
from control_plane.deps import Deps, Settings
from control_plane.services.worker_queues import ensure_worker_queues
from engine.language.definitions import TaskDef, TaskType, WorkflowDef
from engine.language.recursion import recursion_issues
from engine.language.validation import (
    TaskDefLookup,
    ValidationIssue,
    errors_only,
    validate_task_def,
    validate_workflow,
)
from engine.ports.queue_provisioning import (
    ProvisionOutcome,
    plan_update,
    queue_names,
    queue_settings_for_taskdef,
)
from engine.ports.run_store import RunStore

Action = Literal["create", "update", "unchanged"]


def _issues_at(prefix: str, issues: list[ValidationIssue]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for issue in issues:
        path = issue.path
        full = prefix + path[1:] if path.startswith("$") else f"{prefix}.{path}"
        out.append((full, issue.message))
    return out


def _warning_list(warnings: list[tuple[str, str]]) -> list[dict[str, str]]:
    """Warnings as the API answers them (a registration's report, the validate call)."""
    return [{"path": path, "message": message} for path, message in warnings]


def _invalid(what: str, issues: list[tuple[str, str]]) -> ApiError:
    summary = "; ".join(f"{p}: {m}" for p, m in issues[:3])
    more = f" (and {len(issues) - 3} more)" if len(issues) > 3 else ""
    return ApiError(400, f"invalid {what}: {summary}{more}", validation_errors=issues)


class _RegisteredTaskDefs:
    """The registered task definitions, each read from the run store when the validator
    asks for it (a definition names a few types; the store may hold thousands)."""

    def __init__(self, store: RunStore) -> None:
        self._store = store
        self._read: dict[str, TaskDef | None] = {}

    def get(self, name: str, /) -> TaskDef | None:
        if name not in self._read:
            record = self._store.get_task_def(name)
            self._read[name] = None if record is None else TaskDef.model_validate(record.definition)
        return self._read[name]


class MetadataService:
    def __init__(self, settings: Settings, deps: Deps) -> None:
        self.settings = settings
        self.deps = deps

    # --- task definitions -------------------------------------------------------------

    def _parse_task_defs(self, items: list[Any], single: bool) -> list[TaskDef]:
        issues: list[tuple[str, str]] = []
        parsed: list[TaskDef] = []
        #: lower-cased name -> (its item's index, its place in ``parsed``)
        seen: dict[str, tuple[int, int]] = {}
        for i, item in enumerate(items):
            prefix = "$" if single else f"$[{i}]"
            if not isinstance(item, dict):
                issues.append((prefix, "a task definition must be a JSON object"))
                continue
            problems = validate_task_def(item)
            if problems:
                issues += _issues_at(prefix, problems)
                continue
            td = TaskDef.model_validate(item)
            key = td.name.lower()
            if key not in seen:
                seen[key] = (i, len(parsed))
                parsed.append(td)
            elif parsed[seen[key][1]].name == td.name:
                # Conductor registers a list's definitions in turn: the last one stands
                parsed[seen[key][1]] = td
            else:
                issues.append(
                    (
                        f"{prefix}.name",
                        f"task definition {td.name!r} differs only in case from the one at "
                        f"$[{seen[key][0]}] (their queues would be one)",
                    )
                )
        if issues:
            raise _invalid("task definition" if single else "task definitions", issues)
        return parsed

    def _queue_plan(self, td: TaskDef) -> list[dict[str, Any]]:
        desired = queue_settings_for_taskdef(td)
        plan: list[dict[str, Any]] = []
        for name in queue_names(td.name, self.settings.task_domains.get(td.name, [])):
            current = self.deps.provisioner.get_queue(name)
            if current is None:
                plan.append({"name": name, "action": "create"})
                continue
            _, changed, frozen = plan_update(current, desired)
            entry: dict[str, Any] = {"name": name, "action": "update" if changed else "unchanged"}
            if changed:
                entry["changed"] = list(changed)
            if frozen:
                entry["notChangeable"] = list(frozen)
            plan.append(entry)
        return plan

    def register_task_defs(
        self, items: list[Any], *, single: bool = False, dry_run: bool = False
    ) -> dict[str, Any]:
        parsed = self._parse_task_defs(items, single)
        report: list[dict[str, Any]] = []
        for td in parsed:
            data = td.to_json_dict()
            existing = self.deps.run_store.get_task_def(td.name)
            action: Action = (
                "create"
                if existing is None
                else "unchanged"
                if existing.definition == data
                else "update"
            )
            report.append({"name": td.name, "action": action, "queues": self._queue_plan(td)})
        if dry_run:
            return {"dryRun": True, "taskDefs": report}
        # queues first: a stored task definition always has its queues
        for td, entry in zip(parsed, report, strict=True):
            desired = queue_settings_for_taskdef(td)
            queues = []
            for name in queue_names(td.name, self.settings.task_domains.get(td.name, [])):
                result = self.deps.provisioner.ensure_queue(name, desired)
                queues.append(
                    {
                        "name": name,
                        "action": {
                            ProvisionOutcome.CREATED: "create",
                            ProvisionOutcome.UPDATED: "update",
                            ProvisionOutcome.UNCHANGED: "unchanged",
                        }[result.outcome],
                        **({"changed": list(result.changed)} if result.changed else {}),
                        **(
                            {"notChangeable": list(result.not_changeable)}
                            if result.not_changeable
                            else {}
                        ),
                    }
                )
            entry["queues"] = queues
        now = self.deps.clock()
        for td, entry in zip(parsed, report, strict=True):
            if entry["action"] != "unchanged":
                self.deps.run_store.put_task_def(td.name, td.to_json_dict(), now)
        return {"dryRun": False, "taskDefs": report}

    def get_task_def(self, name: str) -> dict[str, Any]:
        record = self.deps.run_store.get_task_def(name)
        if record is None:
            raise not_found(f"No such taskType found by name: {name}")
        return record.definition

    def list_task_defs(self) -> list[dict[str, Any]]:
        return [r.definition for r in self.deps.run_store.list_task_defs()]

    def delete_task_def(self, name: str) -> None:
        if self.deps.run_store.get_task_def(name) is None:
            raise not_found(f"No such taskType found by name: {name}")
        users = sorted(
            f"{r.name} v{r.version}"
            for r in self.deps.run_store.list_definitions()
            if name in self._worker_types(r.definition)
        )
        if users:
            raise conflict(
                f"task definition {name!r} is used by {', '.join(users[:5])}; delete or "
                "update those definitions first"
            )
        self.deps.run_store.delete_task_def(name)

    @staticmethod
    def _worker_types(definition: dict[str, Any]) -> set[str]:
        try:
            wf = WorkflowDef.model_validate(definition)
        except ValidationError:
            return set()
        return {loc.task.name for loc in wf.walk() if loc.task.type == TaskType.WORKER}

    # --- workflow definitions ---------------------------------------------------------

    def _registered_task_defs(self) -> TaskDefLookup:
        return _RegisteredTaskDefs(self.deps.run_store)

    def parse_workflows(self, items: list[Any], single: bool) -> list[WorkflowDef]:
        """The definitions of ``items``, or a 400 naming every error of them (a start with
        an inline definition: no warnings looked for)."""
        return [wf for wf, _ in self.check_workflows(items, single, warnings=False)]

    def check_workflows(
        self, items: list[Any], single: bool, *, warnings: bool = True
    ) -> list[tuple[WorkflowDef, list[tuple[str, str]]]]:
        """Each definition of ``items`` with its warnings (path, message: what Conductor
        accepts but reads null, engine.language.validation), or a 400 naming every error
        of them."""
        # Conductor runs a WORKER type without a task definition with its default one
        # (MetadataMapperService); strict mode keeps the rule that one is registered. The
        # registered ones' inputTemplates count for a system task's required input.
        task_defs = self._registered_task_defs()
        strict = self.settings.strict_task_definitions
        issues: list[tuple[str, str]] = []
        parsed: list[tuple[WorkflowDef, list[tuple[str, str]]]] = []
        seen: dict[tuple[str, int], int] = {}
        for i, item in enumerate(items):
            prefix = "$" if single else f"$[{i}]"
            if not isinstance(item, dict):
                issues.append((prefix, "a workflow definition must be a JSON object"))
                continue
            problems = validate_workflow(
                item, task_defs, require_task_defs=strict, warnings=warnings
            )
            refused = errors_only(problems)
            if refused:
                issues += _issues_at(prefix, refused)
                continue
            wf = WorkflowDef.model_validate(item)
            key = (wf.name, wf.version)
            if key in seen:
                issues.append(
                    (f"{prefix}.version", f"{wf.name} v{wf.version} is also at $[{seen[key]}]")
                )
                continue
            seen[key] = i
            parsed.append((wf, _issues_at(prefix, problems)))
        if not issues:
            issues += self._recursion([wf for wf, _ in parsed], items, single)
        if issues:
            raise _invalid("workflow definition" if single else "workflow definitions", issues)
        return parsed

    def _recursion(
        self, parsed: list[WorkflowDef], items: list[Any], single: bool
    ) -> list[tuple[str, str]]:
        """Definitions that can start themselves through SUB_WORKFLOW/START_WORKFLOW
        chains among the registered ones and these (engine.language.recursion)."""
        registered: dict[str, list[WorkflowDef]] = {}
        replaced = {(wf.name, wf.version) for wf in parsed}
        for record in self.deps.run_store.list_definitions():
            if (record.name, record.version) in replaced:
                continue
            try:
                registered.setdefault(record.name, []).append(
                    WorkflowDef.model_validate(record.definition)
                )
            except ValidationError:
                continue
        positions = [i for i, item in enumerate(items) if isinstance(item, dict)]
        found: list[tuple[str, str]] = []
        for index, problems in recursion_issues(parsed, registered).items():
            prefix = "$" if single else f"$[{positions[index]}]"
            found += _issues_at(prefix, problems)
        return found

    def register_workflows(
        self, items: list[Any], *, single: bool, create_only: bool, dry_run: bool = False
    ) -> dict[str, Any]:
        checked = self.check_workflows(items, single)
        parsed = [wf for wf, _ in checked]
        report: list[dict[str, Any]] = []
        for wf, warnings in checked:
            data = wf.to_json_dict()
            existing = self.deps.run_store.get_definition(wf.name, wf.version)
            if existing is not None and create_only:
                raise conflict(f"workflow {wf.name!r} version {wf.version} already exists")
            action: Action = (
                "create"
                if existing is None
                else "unchanged"
                if existing.definition == data
                else "update"
            )
            report.append(
                {
                    "name": wf.name,
                    "version": wf.version,
                    "action": action,
                    "warnings": _warning_list(warnings),
                }
            )
        if not dry_run:
            for wf in parsed:
                ensure_worker_queues(self.settings, self.deps, wf)
            now = self.deps.clock()
            for wf, entry in zip(parsed, report, strict=True):
                if entry["action"] != "unchanged":
                    self.deps.run_store.put_definition(wf.name, wf.version, wf.to_json_dict(), now)
        return {"dryRun": dry_run, "workflows": report}

    def validate_workflow(self, item: Any) -> dict[str, Any]:
        """``POST /metadata/workflow/validate``: a 400 naming every error, or the
        definition's warnings."""
        ((_, warnings),) = self.check_workflows([item], single=True)
        return {"valid": True, "validationErrors": [], "warnings": _warning_list(warnings)}

    def get_workflow(self, name: str, version: int | None) -> dict[str, Any]:
        record = self.deps.run_store.get_definition(name, version)
        if record is None:
            raise not_found(
                f"No such workflow found by name: {name}, version: "
                f"{version if version is not None else 'null'}"
            )
        return record.definition

    def list_workflows(self) -> list[dict[str, Any]]:
        return [r.definition for r in self.deps.run_store.list_definitions()]

    def names_and_versions(self) -> dict[str, list[dict[str, Any]]]:
        """Conductor's ``getWorkflowNamesAndVersions``: name -> its WorkflowDefSummary
        (``name``, ``version``, ``createTime``) per version, in version order."""
        found: dict[str, list[dict[str, Any]]] = {}
        for record in self.deps.run_store.definition_versions():
            found.setdefault(record.name, []).append(
                {"name": record.name, "version": record.version, "createTime": record.create_time}
            )
        return found

    def delete_workflow(self, name: str, version: int) -> None:
        if not self.deps.run_store.delete_definition(name, version):
            raise not_found(f"No such workflow found by name: {name}, version: {version}")
