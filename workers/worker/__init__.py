"""``podmedic worker``: the Temporal worker that runs the workflows and activities (``main.py``), its options,
health endpoints, versioning, the collector's pacing and the workflow cache's evictions."""
