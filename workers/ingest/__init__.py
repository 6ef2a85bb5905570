"""The ingest service: health signals from the cluster and from detectors become incidents."""
