"""podmedic: remediation of Kubernetes pods whose GPUs and other accelerators fail."""

__version__ = "0.1.0"
