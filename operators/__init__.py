"""Operator tooling: the ``podmedic incidents`` and ``podmedic report`` commands."""
