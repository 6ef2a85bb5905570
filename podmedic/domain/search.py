"""Search attributes that make incidents findable in the Temporal UI and CLI.

``ALL_KEYS`` is the one list: ``podmedic up`` registers it on the dev server
(``dev_server_flags``), the test fixtures too, and docs/operators.md prints the
``temporal operator search-attribute create`` commands for a real cluster from it.
"""

from __future__ import annotations

from typing import Any

from temporalio.common import (
    SearchAttributeIndexedValueType,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)

from podmedic.domain.models import ConfigProblem, UnresolvedDevice

DRIVER = SearchAttributeKey.for_keyword("PodmedicDriver")
NODE = SearchAttributeKey.for_keyword("PodmedicNode")
DEVICE = SearchAttributeKey.for_keyword("PodmedicDevice")
PHASE = SearchAttributeKey.for_keyword("PodmedicPhase")
FAILURE_MODE = SearchAttributeKey.for_keyword("PodmedicFailureMode")
NAMESPACE = SearchAttributeKey.for_keyword("PodmedicNamespace")
OUTCOME = SearchAttributeKey.for_keyword("PodmedicOutcome")
JOB = SearchAttributeKey.for_keyword("PodmedicJob")
PODS = SearchAttributeKey.for_keyword_list("PodmedicPods")
AWAITING_APPROVAL = SearchAttributeKey.for_keyword("PodmedicAwaitingApproval")
TICKET = SearchAttributeKey.for_keyword("PodmedicTicket")
DEVICE_UUIDS = SearchAttributeKey.for_keyword_list("PodmedicDeviceUuids")
"""The GPU's UUID where its driver publishes one: a device's history follows the GPU, not the slot. A
list because Temporal's SQL visibility (and the dev server's) holds at most 10 Keyword attributes a
namespace, and podmedic has 10; a list of one matches ``PodmedicDeviceUuids = '<uuid>'``."""

ALL_KEYS: tuple[SearchAttributeKey[Any], ...] = (
    DRIVER, NODE, DEVICE, PHASE, FAILURE_MODE, NAMESPACE, OUTCOME, JOB, PODS, AWAITING_APPROVAL, TICKET, DEVICE_UUIDS,
)

_CLI_TYPES = {
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.KEYWORD_LIST: "KeywordList",
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DOUBLE: "Double",
    SearchAttributeIndexedValueType.BOOL: "Bool",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
}


def cli_type(key: SearchAttributeKey[Any]) -> str:
    """The type name the ``temporal`` CLI uses for ``key`` (``Keyword``, ``KeywordList``, ...)."""
    return _CLI_TYPES[key.indexed_value_type]


def dev_server_flags() -> list[str]:
    """``temporal server start-dev`` flags registering every podmedic attribute."""
    return [f"--search-attribute={k.name}={cli_type(k)}" for k in ALL_KEYS]


def initial(driver: str, device: str, node: str | None) -> TypedSearchAttributes:
    """Attributes set at start, so even a brand-new incident is findable."""
    pairs = [
        SearchAttributePair(DRIVER, driver),
        SearchAttributePair(DEVICE, device),
        SearchAttributePair(PHASE, "Opened"),
    ]
    if node:
        pairs.append(SearchAttributePair(NODE, node))
    return TypedSearchAttributes(pairs)


def for_config_problem(problem: ConfigProblem) -> TypedSearchAttributes:
    """Attributes of a pod's configuration incident."""
    return _pod_report(problem.pod.namespace, "bad_config", problem.node, problem.driver)


def for_unresolved_device(report: UnresolvedDevice) -> TypedSearchAttributes:
    """Attributes of a report of a device podmedic could not resolve (no driver is known for sure)."""
    return _pod_report(report.pod.namespace, "unresolved_device", report.node, None)


def _pod_report(namespace: str, failure_mode: str, node: str | None, driver: str | None) -> TypedSearchAttributes:
    pairs = [SearchAttributePair(DRIVER, driver)] if driver else []
    pairs += [
        SearchAttributePair(NAMESPACE, namespace),
        SearchAttributePair(FAILURE_MODE, failure_mode),
        SearchAttributePair(PHASE, "Opened"),
    ]
    if node:
        pairs.append(SearchAttributePair(NODE, node))
    return TypedSearchAttributes(pairs)


def for_pool(driver: str, node: str | None) -> TypedSearchAttributes:
    """Attributes of a storm's pool fence (the node: where the pool's failed devices were seen)."""
    pairs = [SearchAttributePair(DRIVER, driver), SearchAttributePair(PHASE, "Fenced")]
    if node:
        pairs.append(SearchAttributePair(NODE, node))
    return TypedSearchAttributes(pairs)


def for_storm(driver: str) -> TypedSearchAttributes:
    """Attributes of a driver's storm turn-keeper (``workflows/fleet/storm_turn_keeper.py``)."""
    return TypedSearchAttributes([SearchAttributePair(DRIVER, driver), SearchAttributePair(PHASE, "Storm")])


def for_workload(driver: str, namespace: str, name: str, pods: list[str]) -> TypedSearchAttributes:
    """Attributes of a workload's stall incident: its driver, namespace, workload name and pods."""
    return TypedSearchAttributes([
        SearchAttributePair(DRIVER, driver),
        SearchAttributePair(NAMESPACE, namespace),
        SearchAttributePair(JOB, name),
        SearchAttributePair(PODS, pods[:50]),
        SearchAttributePair(PHASE, "Acting"),
    ])


def for_node(driver: str, node: str) -> TypedSearchAttributes:
    """Attributes of a node's watch (and node incident)."""
    return TypedSearchAttributes([
        SearchAttributePair(DRIVER, driver),
        SearchAttributePair(NODE, node),
        SearchAttributePair(PHASE, "Watching"),
    ])


def for_maintenance(node: str) -> TypedSearchAttributes:
    """Attributes of a node's announced maintenance (``workflows/node/maintenance.py``)."""
    return TypedSearchAttributes([SearchAttributePair(NODE, node), SearchAttributePair(PHASE, "Waiting")])
