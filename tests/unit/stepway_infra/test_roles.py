"""The built-in roles snapshot the program and the policy pack read roles from."""

from __future__ import annotations

import re
from datetime import date

import pytest

from stepway_infra import roles

GUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_snapshot_says_where_and_when_it_was_taken() -> None:
    snapshot = roles.snapshot()
    assert (
        snapshot.source
        == "https://learn.microsoft.com/azure/role-based-access-control/built-in-roles"
    )
    assert "built-in-roles.md" in snapshot.source_revision
    date.fromisoformat(snapshot.taken)
    assert all(GUID.match(guid) for guid in snapshot.roles.values())
    assert len(set(snapshot.roles.values())) == len(snapshot.roles), "one id per role"


def test_service_bus_roles_have_azures_ids() -> None:
    # The ids Azure documents (and issue 14 quotes); the program had others.
    assert roles.builtin_role_id(roles.SERVICE_BUS_DATA_RECEIVER) == (
        "4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0"
    )
    assert roles.builtin_role_id(roles.SERVICE_BUS_DATA_SENDER) == (
        "69a216fc-b8fb-44d8-bc22-1f3c2cd27a39"
    )


def test_lookup_by_id_and_unknown_names() -> None:
    snapshot = roles.snapshot()
    assert snapshot.name_of("7F951DDA-4ED3-4680-A7CA-43FE172D538D") == roles.ACR_PULL
    assert snapshot.name_of("00000000-0000-0000-0000-000000000000") is None
    with pytest.raises(KeyError, match="'Service Bus Data Receiver' is not in the built-in"):
        roles.builtin_role_id("Service Bus Data Receiver")


def test_forbidden_roles() -> None:
    for name in (
        "Owner",
        "Contributor",
        "User Access Administrator",
        "Role Based Access Control Administrator",
        "Azure Service Bus Data Owner",
        "Storage Blob Data Owner",
    ):
        assert roles.is_forbidden(name), name
        assert name in roles.snapshot().roles
    assert not roles.is_forbidden(roles.STORAGE_BLOB_DATA_CONTRIBUTOR)
