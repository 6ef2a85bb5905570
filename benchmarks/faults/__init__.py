"""``python -m benchmarks faults``: the end-to-end fault suite (one scenario per module)."""
