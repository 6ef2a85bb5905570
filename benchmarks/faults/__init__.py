"""``podmedic bench faults``: the end-to-end fault suite (one scenario per module)."""
