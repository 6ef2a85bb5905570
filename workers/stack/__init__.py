"""The local stack behind ``podmedic up`` and ``podmedic demo``: server, simulator, worker, ingest."""
