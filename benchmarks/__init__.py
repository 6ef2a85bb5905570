"""Benchmarks: commands that start what they need, print figures and write them as JSON."""
