"""Mutation checks: each README claim's tests, run with a bug that breaks the claim, must fail."""
