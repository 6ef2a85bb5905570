"""Node agents that read device health where it happens and post it to ingest."""
