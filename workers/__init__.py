"""podmedic's processes, on top of everything else: the Temporal worker (``worker/``), the ingest
(``ingest/``), the node agent (``agent/``), the admission webhook (``admission/``), the local stack
(``stack/``) and the ``podmedic`` command (``cli/``). Below them: ``workflows/``, ``activities/``, and the
foundation in ``podmedic/`` (domain, settings, telemetry, the Kubernetes and Temporal adapters)."""
