"""A loaded policy is immutable through and through: every incident of one policy shares one parsed instance
(``podmedic/domain/policy_ref.py`` caches ``unpack`` by content), so a list one incident could append to would
change the policy of every other. pydantic's ``frozen`` stops attribute assignment only, not a list's
``append`` or a dict's item assignment: the policy's sequences are tuples and its maps read-only
(``podmedic.domain.base.FrozenMap``), the ticket backends' sections included."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from podmedic.domain.policy import DriverPolicy
from podmedic.domain.policy_file import load_policy, parse_policy
from podmedic.domain.policy_ref import pack, unpack


def _values(model: BaseModel, path: str = "") -> Iterator[tuple[str, object]]:
    for name in type(model).model_fields:
        value = getattr(model, name)
        where = f"{path}.{name}" if path else name
        yield where, value
        if isinstance(value, BaseModel):
            yield from _values(value, where)
        elif isinstance(value, tuple):
            for i, item in enumerate(value):
                if isinstance(item, BaseModel):
                    yield from _values(item, f"{where}[{i}]")


def test_no_policy_field_holds_a_list_an_incident_could_change() -> None:
    shipped = load_policy(None)
    for policy in [*shipped.drivers.values(), unpack(pack(shipped.for_driver("gpu.nvidia.com")))]:
        lists = [where for where, value in _values(policy) if isinstance(value, list | set | bytearray | dict)]
        assert not lists, lists


def test_the_ticket_backends_lists_are_tuples_too() -> None:
    policies = parse_policy("""
drivers:
  default: {}
  a: {ticket: {backend: jira, jira: {url: "https://x", project: P, email: bot@x.io, token_file: /t}}}
  b: {ticket: {backend: servicenow, servicenow: {url: "https://x", user: u, password_file: /p}}}
""")
    for driver in ("a", "b"):
        lists = [where for where, value in _values(unpack(pack(policies.for_driver(driver))))
                 if isinstance(value, list | set | bytearray | dict)]
        assert not lists, (driver, lists)


def test_the_shared_instance_refuses_a_change_to_its_maps() -> None:
    policy: DriverPolicy = unpack(pack(load_policy(None).for_driver("gpu.nvidia.com")))
    try:
        policy.detection.degradation["temperature_c"] = 1.0  # type: ignore[index]
    except TypeError:
        pass
    else:
        raise AssertionError("the shared policy's degradation map took a change")
    assert policy.detection.degradation["temperature_c"] == 90.0


def test_the_shared_instance_refuses_a_change() -> None:
    policy: DriverPolicy = unpack(pack(load_policy(None).for_driver("gpu.nvidia.com")))
    assert unpack(pack(load_policy(None).for_driver("gpu.nvidia.com"))) is policy
    assert not hasattr(policy.recovery.transient, "append")
    assert not hasattr(policy.classification.codes.permanent, "append")
