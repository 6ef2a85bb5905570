"""The cluster simulator: a Kubernetes API server plus simulated cluster behaviours."""

from podmedic.sim.cluster import SimCluster
from podmedic.sim.config import SimConfig, SimTimings

__all__ = ["SimCluster", "SimConfig", "SimTimings"]
