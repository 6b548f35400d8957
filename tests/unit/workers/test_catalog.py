"""workers/catalog.py: the worker.yaml model, the loader and the queue names."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from workers.catalog import (
    MAX_QUEUE_NAME_LENGTH,
    CatalogError,
    WorkerCatalogEntry,
    entry_queues,
    load_catalog,
    queue_names,
)

REPO = Path(__file__).resolve().parents[3]

MINIMAL = {"name": "document", "taskTypes": ["parse_pdf"], "image": "stepway/doc:1"}


def entry(**changes: object) -> WorkerCatalogEntry:
    return WorkerCatalogEntry.model_validate({**MINIMAL, **changes})


def write(root: Path, area: str, text: str) -> Path:
    (root / area).mkdir(parents=True, exist_ok=True)
    path = root / area / "worker.yaml"
    path.write_text(text)
    return path


# -- the repository's catalog ------------------------------------------------


def test_repository_catalog_has_the_three_code_areas_of_seed_page_9() -> None:
    catalog = {e.name: e for e in load_catalog(REPO / "workers")}
    assert set(catalog) == {"connector", "data_platform", "document"}
    assert catalog["document"].task_types == ["parse_pdf", "extract_excel", "classify_document"]
    assert catalog["data_platform"].task_types == ["reconcile_ledger", "bulk_export"]
    assert catalog["data_platform"].job is True
    assert catalog["connector"].task_types == ["fetch_bank_feed", "lodge_return"]
    assert catalog["connector"].secrets == ["connector-api-key"]
    for area in catalog:
        assert (REPO / "workers" / area / "__init__.py").exists()


def test_catalog_module_imports_no_engine_and_no_pulumi() -> None:
    code = (
        "import sys, workers.catalog; "
        "bad = [m for m in sys.modules if m.split('.')[0] in "
        "('engine', 'control_plane', 'pulumi', 'pulumi_azure_native', 'stepway_infra')]; "
        "print(bad); sys.exit(1 if bad else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


# -- defaults and fields -----------------------------------------------------


def test_defaults() -> None:
    e = entry()
    assert e.description == ""
    assert (e.cpu, e.memory) == (0.5, "1Gi")
    assert (e.min_replicas, e.max_replicas, e.scale_to_zero) == (1, 10, True)
    assert e.messages_per_replica == 5
    assert e.domains == [] and e.secrets == [] and e.env == {}
    assert e.job is False


def test_unknown_field_is_forbidden_and_named() -> None:
    with pytest.raises(ValidationError) as info:
        entry(replicas=3)
    assert "replicas" in str(info.value)


def test_unknown_field_error_names_file_and_field(tmp_path: Path) -> None:
    write(tmp_path, "document", "name: document\ntaskTypes: [parse_pdf]\nimage: x\ngpu: 1\n")
    with pytest.raises(CatalogError) as info:
        load_catalog(tmp_path)
    message = str(info.value)
    assert str(tmp_path / "document" / "worker.yaml") in message
    assert "gpu: unknown field" in message


def test_task_types_required_and_not_empty() -> None:
    with pytest.raises(ValidationError):
        WorkerCatalogEntry.model_validate({"name": "document", "image": "x"})
    with pytest.raises(ValidationError):
        entry(taskTypes=[])


@pytest.mark.parametrize(
    "name",
    ["parse_pdf", "a", "A1", "parse.pdf", "parse-pdf", "x" * 200, "Classify_Document2"],
)
def test_valid_task_type_names(name: str) -> None:
    assert entry(taskTypes=[name]).task_types == [name]


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "1-200"),
        ("_parse", "starting and ending"),
        ("parse_", "starting and ending"),
        ("parse pdf", "not a valid Service Bus queue name"),
        ("parse/pdf", "not a valid Service Bus queue name"),
        ("pärse", "not a valid Service Bus queue name"),
        ("x" * 201, "1-200"),
        ("parse_pdf-high", "-high"),
    ],
)
def test_invalid_task_type_names(name: str, reason: str) -> None:
    with pytest.raises(ValidationError) as info:
        entry(taskTypes=[name])
    assert reason in str(info.value)


def test_task_types_unique_case_insensitively() -> None:
    with pytest.raises(ValidationError, match="duplicate task type"):
        entry(taskTypes=["parse_pdf", "Parse_PDF"])


def test_domains_are_valid_queue_prefixes() -> None:
    assert entry(domains=["acme", "eu.west", "tenant-7"]).domains == ["acme", "eu.west", "tenant-7"]
    for bad in ["-acme", "acme-", "ac me", "", "x" * 60, "acme-high"]:
        with pytest.raises(ValidationError):
            entry(domains=[bad])


def test_domain_queue_names_fit_service_bus_limits() -> None:
    e = entry(taskTypes=["t" * 200], domains=["d" * 54])
    assert max(len(q) for q in entry_queues(e)) <= MAX_QUEUE_NAME_LENGTH


def test_queues_unique_within_an_entry() -> None:
    # domain "a" + type "b" gives queue "a-b", which is also a type.
    with pytest.raises(ValidationError, match="duplicate queue name"):
        entry(taskTypes=["b", "a-b"], domains=["a"])


def test_area_name_rules() -> None:
    assert entry(name="data_platform").name == "data_platform"
    for bad in ["Document", "1doc", "doc-", "d" * 21, "doc.x"]:
        with pytest.raises(ValidationError):
            entry(name=bad)


def test_resources_and_replicas() -> None:
    assert entry(cpu=1.25, memory="2.5Gi").cpu == 1.25
    for bad in [{"cpu": 0.3}, {"cpu": 8}, {"memory": "512Mi"}, {"minReplicas": -1}]:
        with pytest.raises(ValidationError):
            entry(**bad)
    with pytest.raises(ValidationError, match="minReplicas"):
        entry(minReplicas=5, maxReplicas=2)


def test_secrets_and_env() -> None:
    e = entry(secrets=["bank-secret"], env={"LOG_LEVEL": "info"})
    assert e.secrets == ["bank-secret"]
    with pytest.raises(ValidationError, match="Key Vault"):
        entry(secrets=["bank_secret"])
    with pytest.raises(ValidationError, match="reserved"):
        entry(env={"AZURE_CLIENT_ID": "x"})
    with pytest.raises(ValidationError, match="reserved"):
        entry(env={"STEPWAY_TASK_TYPES": "x"})
    with pytest.raises(ValidationError, match="not valid"):
        entry(env={"1BAD": "x"})


# -- queue names ---------------------------------------------------------------


def test_queue_names_of_a_type() -> None:
    assert queue_names("parse_pdf") == ["parse_pdf", "parse_pdf-high"]
    assert queue_names("parse_pdf", ["acme", "globex"]) == [
        "parse_pdf",
        "parse_pdf-high",
        "acme-parse_pdf",
        "globex-parse_pdf",
    ]


def test_queue_names_of_an_entry() -> None:
    e = entry(taskTypes=["parse_pdf", "extract_excel"], domains=["acme"])
    assert (
        e.queue_names()
        == entry_queues(e)
        == [
            "parse_pdf",
            "parse_pdf-high",
            "acme-parse_pdf",
            "extract_excel",
            "extract_excel-high",
            "acme-extract_excel",
        ]
    )


# -- loading -----------------------------------------------------------------


def test_load_catalog_sorted_by_area(tmp_path: Path) -> None:
    write(tmp_path, "zeta", "name: zeta\ntaskTypes: [z]\nimage: x\n")
    write(tmp_path, "alpha", "name: alpha\ntaskTypes: [a]\nimage: x\n")
    (tmp_path / "not_an_area").mkdir()
    assert [e.name for e in load_catalog(tmp_path)] == ["alpha", "zeta"]


def test_name_must_match_directory(tmp_path: Path) -> None:
    path = write(tmp_path, "document", "name: documents\ntaskTypes: [a]\nimage: x\n")
    with pytest.raises(CatalogError, match="must equal the code area directory") as info:
        load_catalog(tmp_path)
    assert str(info.value).startswith(f"{path}: name:")


def test_invalid_yaml_and_non_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "document", "name: [unclosed\n")
    with pytest.raises(CatalogError, match="not valid YAML") as info:
        load_catalog(tmp_path)
    assert str(info.value).startswith(str(path))
    write(tmp_path, "document", "- a list\n")
    with pytest.raises(CatalogError, match="must be a YAML mapping"):
        load_catalog(tmp_path)


def test_field_error_names_file_and_field(tmp_path: Path) -> None:
    write(tmp_path, "document", "name: document\ntaskTypes: [ok, 'bad name']\nimage: x\n")
    with pytest.raises(CatalogError) as info:
        load_catalog(tmp_path)
    assert "worker.yaml" in str(info.value)
    assert "taskTypes.1:" in str(info.value)


def test_bad_domain_error_names_field(tmp_path: Path) -> None:
    write(tmp_path, "document", "name: document\ntaskTypes: [a]\nimage: x\ndomains: ['-x']\n")
    with pytest.raises(CatalogError, match=r"domains\.0: domain '-x'"):
        load_catalog(tmp_path)


def test_task_type_belongs_to_one_area(tmp_path: Path) -> None:
    write(tmp_path, "alpha", "name: alpha\ntaskTypes: [parse_pdf]\nimage: x\n")
    write(tmp_path, "beta", "name: beta\ntaskTypes: [Parse_Pdf]\nimage: x\n")
    with pytest.raises(CatalogError, match="also served by code area 'alpha'"):
        load_catalog(tmp_path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="does not exist"):
        load_catalog(tmp_path / "nope")


def test_empty_catalog(tmp_path: Path) -> None:
    assert load_catalog(tmp_path) == []
