"""``podmedic setup temporal`` against a bare Temporal dev server: creates the namespace and the search
attributes once, changes nothing the second time, and refuses an attribute of the wrong type.

The expected names and types are those ``temporal operator search-attribute list`` shows: podmedic's
list (``podmedic/domain/search.py``) as the server stores it (``ListSearchAttributes``).
"""

from __future__ import annotations

import subprocess
import sys

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
from temporalio.client import Client

from podmedic.domain import search

PODMEDIC = [sys.executable, "-m", "workers.cli.main"]


def _setup(address: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMEDIC, "setup", "temporal", "--temporal-address", address, *args],
                          capture_output=True, text=True, timeout=120)


async def test_setup_creates_once_and_is_idempotent(bare_server: str) -> None:
    dry = _setup(bare_server, "--temporal-namespace", "fleet", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == "namespace fleet: would create (retention 30d)"
    first = _setup(bare_server, "--temporal-namespace", "fleet", "--retention", "7d")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0] == "namespace fleet: created (retention 7d)"
    assert lines[1].startswith("search attributes: 0 present, added PodmedicDriver"), lines
    client = await Client.connect(bare_server, namespace="fleet")
    listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace="fleet"))
    assert {k.name: int(k.indexed_value_type) for k in search.ALL_KEYS} == {
        name: int(kind) for name, kind in listed.custom_attributes.items() if name.startswith("Podmedic")}
    again = _setup(bare_server, "--temporal-namespace", "fleet")
    assert again.returncode == 0 and again.stdout.splitlines() == [
        "namespace fleet: exists", f"search attributes: all {len(search.ALL_KEYS)} present"], again.stdout


async def test_a_wrong_type_or_a_missing_namespace_is_one_line(bare_server: str) -> None:
    client = await Client.connect(bare_server, namespace="default")
    await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
        namespace="default", search_attributes={search.DRIVER.name: IndexedValueType.INDEXED_VALUE_TYPE_TEXT}))
    wrong = _setup(bare_server, "--temporal-namespace", "default")
    assert wrong.returncode == 1
    assert wrong.stderr.strip().splitlines()[-1] == (
        "podmedic setup temporal: search attributes of default: PodmedicDriver is INDEXED_VALUE_TYPE_TEXT, "
        "podmedic needs INDEXED_VALUE_TYPE_KEYWORD (Temporal cannot change a type: remove the attribute or use "
        "another namespace)")
    missing = _setup(bare_server, "--temporal-namespace", "nowhere", "--no-create-namespace")
    assert missing.returncode == 1 and "namespace nowhere does not exist" in missing.stderr
