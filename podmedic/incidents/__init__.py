"""Incidents as Temporal holds them: finding, reading, steering and writing them up (no printing)."""
