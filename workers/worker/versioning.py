"""Worker Deployment Versioning from the environment (``PODMEDIC_DEPLOYMENT_NAME``, ``PODMEDIC_BUILD_ID``).

With both set, the worker joins Temporal's Worker Deployment ``<name>`` as version ``<build id>``;
new versions are rolled out with ``temporal worker deployment set-current-version`` (docs/deploy.md).
Every podmedic workflow is ``AUTO_UPGRADE``: incidents wait days for a vendor, so pinning them would
keep old workers running that long; instead each new build must replay the recorded histories
(``tests/replay``) before it ships. Without the variables the worker is unversioned.
"""

from __future__ import annotations

from collections.abc import Mapping

from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.worker import WorkerDeploymentConfig

from podmedic.settings.groups import WorkerDeployment

BEHAVIOR = VersioningBehavior.AUTO_UPGRADE


def deployment_config_from_env(env: Mapping[str, str] | None = None) -> WorkerDeploymentConfig | None:
    """The worker's deployment config, or ``None`` when neither variable is set.

    Raises:
        SettingsError: only one of the two variables is set, naming the missing one.
    """
    settings = WorkerDeployment.load(env)
    if not settings.deployment_name or not settings.build_id:
        return None
    version = WorkerDeploymentVersion(deployment_name=settings.deployment_name, build_id=settings.build_id)
    return WorkerDeploymentConfig(version=version, use_worker_versioning=True, default_versioning_behavior=BEHAVIOR)
