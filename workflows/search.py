"""Search attributes that make incidents findable in the Temporal UI and CLI."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

from podmedic.models import ConfigProblem

DRIVER = SearchAttributeKey.for_keyword("PodmedicDriver")
NODE = SearchAttributeKey.for_keyword("PodmedicNode")
DEVICE = SearchAttributeKey.for_keyword("PodmedicDevice")
PHASE = SearchAttributeKey.for_keyword("PodmedicPhase")
FAILURE_MODE = SearchAttributeKey.for_keyword("PodmedicFailureMode")
NAMESPACE = SearchAttributeKey.for_keyword("PodmedicNamespace")
OUTCOME = SearchAttributeKey.for_keyword("PodmedicOutcome")

ALL_KEYS = (DRIVER, NODE, DEVICE, PHASE, FAILURE_MODE, NAMESPACE, OUTCOME)


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
    pairs = [
        SearchAttributePair(DRIVER, problem.driver),
        SearchAttributePair(NAMESPACE, problem.pod.namespace),
        SearchAttributePair(FAILURE_MODE, "bad_config"),
        SearchAttributePair(PHASE, "Opened"),
    ]
    if problem.node:
        pairs.append(SearchAttributePair(NODE, problem.node))
    return TypedSearchAttributes(pairs)


def for_node(driver: str, node: str) -> TypedSearchAttributes:
    """Attributes of a node's watch (and node incident)."""
    return TypedSearchAttributes([
        SearchAttributePair(DRIVER, driver),
        SearchAttributePair(NODE, node),
        SearchAttributePair(PHASE, "Watching"),
    ])
