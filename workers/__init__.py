"""Processes: the Temporal worker, the event ingest service, the stack supervisor, the CLI."""
