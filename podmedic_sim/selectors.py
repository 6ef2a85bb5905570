"""Label and field selectors, in the query-string syntax and the LabelSelector object form."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from podmedic.domain.base import Obj
from podmedic_sim.handlers_common import ApiError

Predicate = Callable[[Obj], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_CMP_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")
_KEY_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*$")
_ORDER_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*([<>])\s*(\S*)\s*$")

_META = ("metadata.name", "metadata.namespace")

FIELD_LABELS: dict[str, tuple[str, ...]] = {
    # kubernetes/kubernetes pkg/apis/core/v1/conversion.go (AddFieldLabelConversionFuncForKind).
    "Pod": (*_META, "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Node": (*_META, "spec.unschedulable"),
    "Event": (*_META, "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    "Namespace": (*_META, "status.phase"),
    # pkg/apis/batch/v1/conversion.go.
    "Job": (*_META, "status.successful"),
    # kubernetes/api resource/v1/types.go ResourceSliceSelector*; pkg/apis/resource/v1/conversion.go.
    "ResourceSlice": (*_META, "spec.nodeName", "spec.driver"),
}
"""The field labels a real API server accepts per kind; every other kind only ``metadata.name`` and
``metadata.namespace`` (apimachinery's ``DefaultMetaV1FieldSelectorConversion``). Anything else is
400 ``field label not supported``, as upstream answers."""

_FIELD_ALIASES: dict[str, tuple[str, ...]] = {"source": ("source", "component")}


def field_labels(kind: str) -> tuple[str, ...]:
    """The field selector labels upstream supports for ``kind``."""
    return FIELD_LABELS.get(kind, _META)



def _split_terms(text: str) -> list[str]:
    """Split on commas that are not inside ``( )`` of a set expression."""
    terms: list[str] = []
    depth = 0
    cur: list[str] = []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _labels(obj: Obj) -> dict[str, str]:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def parse_label_selector(text: str | None) -> Predicate | None:
    """Compile ``a=b,c!=d,e in (f,g),!h``; ``None`` when empty; 400 when malformed."""
    if not text or not text.strip():
        return None
    checks: list[Predicate] = []
    for term in _split_terms(text):
        checks.append(_label_term(term))
    return lambda obj: all(check(obj) for check in checks)


def _label_term(term: str) -> Predicate:
    m = _SET_RE.match(term)
    if m:
        if m.group(1):
            raise ApiError(400, f"unable to parse requirement: invalid selector term {term!r}")
        key, op = m.group(2), m.group(3)
        values = {v.strip() for v in m.group(4).split(",") if v.strip()}
        if op == "in":
            return lambda o: _labels(o).get(key) in values
        return lambda o: _labels(o).get(key) not in values
    m = _CMP_RE.match(term)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda o: _labels(o).get(key) != value
        return lambda o: _labels(o).get(key) == value
    m = _ORDER_RE.match(term)
    if m:
        return _order_term(*m.groups())
    m = _KEY_RE.match(term)
    if m:
        neg, key = m.groups()
        if neg:
            return lambda o: key not in _labels(o)
        return lambda o: key in _labels(o)
    raise ApiError(400, f"unable to parse requirement: invalid label selector term {term!r}")


def _order_term(key: str, op: str, value: str) -> Predicate:
    """``key>N`` / ``key<N`` (k8s.io/apimachinery ``labels.Parse``, operators Gt and Lt): the label is there
    and, read as an integer, greater or less than N; N must be an integer (``NewRequirement``)."""
    try:
        bound = int(value)
    except ValueError:
        raise ApiError(400, f"unable to parse requirement: values[0]: Invalid value: {value!r}: for 'Gt', 'Lt' "
                            "operators, the value must be an integer") from None

    def passes(obj: Obj) -> bool:
        try:
            found = int(_labels(obj)[key])
        except (KeyError, ValueError):
            return False
        return found > bound if op == ">" else found < bound

    return passes


def label_selector_object(selector: Obj | None) -> Predicate:
    """Compile a ``LabelSelector`` object (matchLabels/matchExpressions), as in PDBs.

    An empty selector matches everything (the policy/v1 PDB semantics).
    """
    selector = selector or {}
    match_labels: dict[str, str] = selector.get("matchLabels") or {}
    exprs: list[Obj] = selector.get("matchExpressions") or []

    def check(obj: Obj) -> bool:
        labels = _labels(obj)
        if any(labels.get(k) != v for k, v in match_labels.items()):
            return False
        for expr in exprs:
            key = str(expr.get("key"))
            op, values = expr.get("operator"), expr.get("values") or []
            present = key in labels
            if (
                (op == "In" and labels.get(key) not in values)
                or (op == "NotIn" and present and labels.get(key) in values)
                or (op == "Exists" and not present)
                or (op == "DoesNotExist" and present)
            ):
                return False
        return True

    return check


def _field_value(obj: Obj, path: tuple[str, ...]) -> str:
    cur: Any = obj
    for part in path:
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_field_selector(text: str | None, kind: str = "") -> Predicate | None:
    """Compile ``spec.nodeName=n,status.phase!=Failed``; 400 for unsupported fields."""
    if not text or not text.strip():
        return None
    checks: list[Predicate] = []
    for term in _split_terms(text):
        m = _CMP_RE.match(term) or re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", term)
        if not m:
            raise ApiError(400, f"invalid selector: {term!r}; can't understand {term!r}")
        name, op, value = m.groups()
        if name not in field_labels(kind):
            # The two messages upstream gives: a kind's own conversion function, and the default one.
            raise ApiError(400, f"field label not supported: {name}" if kind in FIELD_LABELS
                           else f'"{name}" is not a known field selector: only "metadata.name", "metadata.namespace"')
        checks.append(_field_check(_FIELD_ALIASES.get(name, tuple(name.split("."))), op, value))
    return lambda obj: all(check(obj) for check in checks)


def _field_check(path: tuple[str, ...], op: str, value: str) -> Predicate:
    if op == "!=":
        return lambda o: _field_value(o, path) != value
    return lambda o: _field_value(o, path) == value
