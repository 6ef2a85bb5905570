"""``podmedic setup temporal``: the namespace and the search attributes podmedic needs, made once.

Idempotent: what exists is left alone and said so; what is missing is created; an attribute that
exists with another type is an error (Temporal cannot change it; the message names both types).
The calls are the ones ``temporal operator namespace create`` and ``temporal operator
search-attribute create`` make: ``RegisterNamespace`` (workflow service) and
``AddSearchAttributes`` / ``ListSearchAttributes`` (operator service).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
    ListSearchAttributesResponse,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from podmedic.domain import search


class SetupError(Exception):
    """Something Temporal refused or that cannot be fixed by adding; the message says what and how."""


@dataclass
class SetupReport:
    """What was found and done, one line each."""

    lines: list[str] = field(default_factory=list)
    changed: bool = False


async def setup_temporal(client: Client, namespace: str, *, retention: timedelta, create_namespace: bool = True,
                         dry_run: bool = False) -> SetupReport:
    """Make sure ``namespace`` exists and carries every podmedic search attribute."""
    report = SetupReport()
    verb = "would create" if dry_run else "created"
    try:
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
        report.lines.append(f"namespace {namespace}: exists")
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise SetupError(f"namespace {namespace}: cannot read it: {err.message}") from None
        if not create_namespace:
            raise SetupError(f"namespace {namespace} does not exist (create it, e.g. with tcld or the Temporal UI on "
                             "Temporal Cloud, or drop --no-create-namespace)") from None
        if not dry_run:
            try:
                await client.workflow_service.register_namespace(RegisterNamespaceRequest(
                    namespace=namespace, workflow_execution_retention_period=Duration(
                        seconds=int(retention.total_seconds()))))
            except RPCError as exc:
                raise SetupError(f"namespace {namespace}: Temporal refused to create it: {exc.message}") from None
        report.lines.append(f"namespace {namespace}: {verb} (retention {retention.days}d)")
        report.changed = True
        if dry_run:
            report.lines.append(f"search attributes: {verb} {', '.join(k.name for k in search.ALL_KEYS)}")
            return report
    await _attributes(client, namespace, report, dry_run, wait_s=30.0 if report.changed else 0.0)
    return report


async def _listed(client: Client, namespace: str, wait_s: float) -> ListSearchAttributesResponse:
    """The namespace's attributes; a namespace registered a moment ago is "not found" until every
    frontend's namespace cache has it (about 10 s on the dev server), so that is waited out."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=namespace))
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND or time.monotonic() > deadline:
                raise SetupError(f"search attributes of {namespace}: cannot list them: {err.message}") from None
            await asyncio.sleep(1.0)


async def _attributes(client: Client, namespace: str, report: SetupReport, dry_run: bool,
                      wait_s: float) -> None:
    listed = await _listed(client, namespace, wait_s)
    present = dict(listed.custom_attributes)
    wrong = [f"{k.name} is {IndexedValueType.Name(present[k.name])}, podmedic needs "
             f"{IndexedValueType.Name(IndexedValueType.ValueType(int(k.indexed_value_type)))}"
             for k in search.ALL_KEYS if k.name in present and present[k.name] != int(k.indexed_value_type)]
    if wrong:
        raise SetupError(f"search attributes of {namespace}: {'; '.join(wrong)} (Temporal cannot change a type: "
                         "remove the attribute or use another namespace)")
    missing = [k for k in search.ALL_KEYS if k.name not in present]
    if not missing:
        report.lines.append(f"search attributes: all {len(search.ALL_KEYS)} present")
        return
    if not dry_run:
        try:
            await client.operator_service.add_search_attributes(AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={k.name: IndexedValueType.ValueType(int(k.indexed_value_type)) for k in missing}))
        except RPCError as err:
            raise SetupError(f"search attributes of {namespace}: Temporal refused to add them: {err.message} "
                             "(on Temporal Cloud, add them with tcld or in the UI: "
                             f"{', '.join(f'{k.name} ({search.cli_type(k)})' for k in missing)})") from None
    verb = "would add" if dry_run else "added"
    report.lines.append(f"search attributes: {len(search.ALL_KEYS) - len(missing)} present, {verb} "
                        f"{', '.join(k.name for k in missing)}")
    report.changed = True
