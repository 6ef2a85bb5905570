"""Pod-level reports with no device to act on: a pod's own configuration problem, a device podmedic cannot
resolve. Both report on the pod and close (``report.py``)."""
