"""Deterministic workflow code: no I/O, no clocks, no randomness outside the SDK's."""
