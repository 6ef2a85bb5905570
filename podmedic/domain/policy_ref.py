"""A driver's policy named by digest: what an incident's input carries instead of the policy itself.

The policy in force when an incident opens must travel with it (editing the file never changes a
running incident), but inlining every field into every workflow's Input made the Temporal UI's
Input pane a page of YAML per incident. The ingest records each resolved driver policy once, as
the input of a ``PodmedicPolicy`` workflow whose id is its digest (``workflows/policy_record.py``);
an incident's input names it by ``PolicyRef`` and the incident's first activity loads it
(``activities/policy.py``), whose result the history keeps for replay. The content behind a digest
never changes, so the record can be read any time.
"""

from __future__ import annotations

import hashlib
import json

from pydantic import BaseModel, ConfigDict, Field

from podmedic import __version__
from podmedic.domain.policy import DriverPolicy

RECORD_PREFIX = "podmedic-policy"
"""Workflow ids of policy records: ``podmedic-policy/<driver>/<first 16 hex digits of the digest>``."""


class PolicyRef(BaseModel):
    """One driver's resolved policy, by content: the same fields give the same digest everywhere."""

    model_config = ConfigDict(frozen=True)

    driver: str = Field(description="The DRA driver the policy was resolved for.")
    digest: str = Field(pattern=r"^sha256:[0-9a-f]{64}$", description="sha256 of the policy's canonical JSON.")
    version: str = Field(description="The podmedic release that resolved it (its embedded policy is the base).")

    @property
    def record_id(self) -> str:
        """The workflow id of the record holding the policy."""
        return f"{RECORD_PREFIX}/{self.driver}/{self.digest.removeprefix('sha256:')[:16]}"

    @property
    def short(self) -> str:
        """How people see it: ``gpu.nvidia.com@0.1.0 sha256:0123456789ab``."""
        return f"{self.driver}@{self.version} {self.digest[:19]}"


def digest_of(policy: DriverPolicy) -> str:
    """``sha256:<hex>`` of the policy's canonical JSON (keys sorted, no spaces)."""
    canonical = json.dumps(policy.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def ref_of(policy: DriverPolicy) -> PolicyRef:
    """The reference an incident's input carries for ``policy``."""
    return PolicyRef(driver=policy.driver, digest=digest_of(policy), version=__version__)
