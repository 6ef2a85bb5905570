"""A driver policy's reference (``podmedic/domain/policy_ref.py``): the digest follows the content."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from podmedic.domain.models import DeviceRef, IncidentInput
from podmedic.domain.policy_file import parse_policy
from podmedic.domain.policy_ref import pack, ref_of, unpack

ACTING = parse_policy("""
drivers:
  default:
    close: {anti_flap_s: 5}
""")
DEVICE_A = DeviceRef(driver="gpu.nvidia.com", pool="node-0100", device="gpu-0")


def test_an_input_names_its_policy() -> None:
    with pytest.raises(ValueError, match="policy_ref"):
        IncidentInput(device=DEVICE_A)


def test_the_digest_follows_the_content_not_the_order_or_the_object() -> None:
    policy = ACTING.for_driver("gpu.nvidia.com")
    again = type(policy).model_validate_json(policy.model_dump_json())
    assert ref_of(again) == ref_of(policy)
    assert ref_of(policy.model_copy(update={"dry_run": True})).digest != ref_of(policy).digest
    assert ref_of(ACTING.for_driver("gpu.amd.com")).driver == "gpu.amd.com"


def test_incidents_of_one_policy_share_one_parsed_frozen_policy() -> None:
    # Each incident reads its policy from its own memo (fresh bytes): parsed once per content, the
    # instance is shared, so it must be one no incident can change.
    policy = ACTING.for_driver("gpu.nvidia.com")
    first, second = unpack(bytes(pack(policy))), unpack(bytes(bytearray(pack(policy))))
    assert first is second and first == policy
    assert unpack(pack(policy.model_copy(update={"dry_run": True}))) is not first
    with pytest.raises(ValidationError, match="frozen"):
        first.dry_run = True  # type: ignore[misc]
