"""The cluster simulator: a Kubernetes API server plus simulated cluster behaviours."""

from podmedic_sim.cluster import SimCluster
from podmedic_sim.config import SimConfig, SimTimings

__all__ = ["SimCluster", "SimConfig", "SimTimings"]
