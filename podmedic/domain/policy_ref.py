"""A driver's policy named by digest: what an incident's input carries instead of the policy itself.

The policy in force when an incident opens must travel with it (editing the file never changes a
running incident), but inlining every field into the workflow's input made the Temporal UI's Input
pane a page of policy per incident. The input now names it (``PolicyRef``: driver, podmedic
release, digest) and the policy itself rides in the start's memo under ``POLICY_MEMO``, compressed
(its canonical JSON, zlib: the shipped NVIDIA entry stays under the 2 KB at which Temporal warns
about a memo), which the workflow reads in its constructor (deterministic, no
activity: the fence stays in the incident's first workflow task) and checks against the digest
before acting on it.
"""

from __future__ import annotations

import functools
import hashlib
import json
import zlib

from pydantic import BaseModel, ConfigDict, Field

from podmedic import __version__
from podmedic.domain.policy import DriverPolicy

POLICY_MEMO = "podmedic.policy"
"""The memo key holding the driver policy an incident's ``policy_ref`` names."""


class PolicyRef(BaseModel):
    """One driver's resolved policy, by content: the same fields give the same digest everywhere."""

    model_config = ConfigDict(frozen=True)

    driver: str = Field(description="The DRA driver the policy was resolved for.")
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="sha256 of the policy's canonical JSON.")
    version: str = Field(description="The podmedic release that resolved it (its embedded policy is the base).")

    @property
    def short(self) -> str:
        """How people see it: ``gpu.nvidia.com@0.1.0 sha256:0123456789ab``."""
        return f"{self.driver}@{self.version} {self.digest[:19]}"


def canonical(policy: DriverPolicy) -> bytes:
    """The policy's canonical JSON: keys sorted, no spaces."""
    return json.dumps(policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()


def digest_of(policy: DriverPolicy) -> str:
    """``sha256:<hex>`` of the policy's canonical JSON."""
    return "sha256:" + hashlib.sha256(canonical(policy)).hexdigest()


def pack(policy: DriverPolicy) -> bytes:
    """What the memo carries: the canonical JSON, zlib-compressed."""
    return zlib.compress(canonical(policy), 9)


@functools.lru_cache(maxsize=64)
def packed_digest(data: bytes) -> str:
    """``sha256:<hex>`` of the content ``pack`` wrote: the digest the input names, whatever fields a later
    release's model adds with defaults (re-dumping the parsed policy would name other content).

    Kept per content, as ``unpack``: every incident checks its memo against its input when its
    workflow is loaded, and decompressing and hashing the policy each time was a visible share of the
    worker's workflow threads in ``python -m benchmarks cost`` (py-spy, under load).
    """
    try:
        return "sha256:" + hashlib.sha256(zlib.decompress(data)).hexdigest()
    except zlib.error as exc:
        raise ValueError(f"not a packed policy: {exc}") from None


@functools.lru_cache(maxsize=64)
def unpack(data: bytes) -> DriverPolicy:
    """The policy ``pack`` made (raises ``ValueError`` on anything else).

    The same bytes give the same instance: every incident of one policy shares one parsed, frozen
    policy. Parsed per incident it was the largest part of a cached incident's Python memory, and a
    storm caches thousands of incidents.
    """
    try:
        return DriverPolicy.model_validate_json(zlib.decompress(data))
    except zlib.error as exc:
        raise ValueError(f"not a packed policy: {exc}") from None


def ref_of(policy: DriverPolicy) -> PolicyRef:
    """The reference an incident's input carries for ``policy``."""
    return PolicyRef(driver=policy.driver, digest=digest_of(policy), version=__version__)
