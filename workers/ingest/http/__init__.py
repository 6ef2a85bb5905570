"""The ingest service's HTTP endpoints: CloudEvents and Alertmanager webhooks into health events."""
