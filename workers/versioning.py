"""Worker Deployment Versioning from the environment (``PODMEDIC_DEPLOYMENT_NAME``, ``PODMEDIC_BUILD_ID``).

With both set, the worker joins Temporal's Worker Deployment ``<name>`` as version ``<build id>``;
new versions are rolled out with ``temporal worker deployment set-current-version`` (docs/deploy.md).
Every podmedic workflow is ``AUTO_UPGRADE``: incidents wait days for a vendor, so pinning them would
keep old workers running that long; instead each new build must replay the recorded histories
(``tests/replay``) before it ships. Without the variables the worker is unversioned, as before.
"""

from __future__ import annotations

import os

from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

DEPLOYMENT_ENV = "PODMEDIC_DEPLOYMENT_NAME"
BUILD_ENV = "PODMEDIC_BUILD_ID"
BEHAVIOR = VersioningBehavior.AUTO_UPGRADE


class VersioningError(ValueError):
    """The versioning variables are set inconsistently."""


def deployment_config_from_env(env: dict[str, str] | None = None) -> WorkerDeploymentConfig | None:
    """The worker's deployment config, or ``None`` when neither variable is set.

    Raises:
        VersioningError: only one of the two variables is set, naming the missing one.
    """
    env = dict(os.environ) if env is None else env
    name, build = env.get(DEPLOYMENT_ENV, "").strip(), env.get(BUILD_ENV, "").strip()
    if not name and not build:
        return None
    if not name or not build:
        missing = DEPLOYMENT_ENV if not name else BUILD_ENV
        raise VersioningError(f"{missing} is empty: set {DEPLOYMENT_ENV} and {BUILD_ENV} together, or neither")
    return WorkerDeploymentConfig(version=WorkerDeploymentVersion(deployment_name=name, build_id=build),
                                  use_worker_versioning=True, default_versioning_behavior=BEHAVIOR)
