"""Flags over environment: fill each flag not given from the process's settings model.

Every parser's environment-backed flags default to ``None``; after parsing, the command's settings
model (``set_defaults(settings_model=...)``, else ``CliSettings``) is read once, and each flag still
``None`` takes the variable's value, or the command's own default (``command_defaults``), or the
model's. Operator commands whose ``--stack`` sits between flag and variable opt out
(``settings_fill=False``) and resolve in ``workers.cli.connection``.
"""

from __future__ import annotations

import argparse
from typing import Any

from pydantic import SecretStr

from podmedic.settings import CliSettings, ProcessSettings


def use_settings(p: argparse.ArgumentParser, model: type[ProcessSettings], process: str) -> None:
    """Make ``p`` read ``model``'s variables, and list them with their defaults at the end of its ``--help``."""
    from podmedic.settings.describe import help_epilog

    p.set_defaults(settings_model=model)
    p.epilog = help_epilog(model, process)
    p.formatter_class = argparse.RawDescriptionHelpFormatter


def apply_settings(args: argparse.Namespace) -> ProcessSettings | None:
    """Read the command's settings (``SettingsError`` names each bad variable) and fill the flags not given.

    A command with ``settings_model=None`` (``config show``) reads its settings itself.
    """
    model: type[ProcessSettings] | None = getattr(args, "settings_model", CliSettings)
    if model is None:
        return None
    settings = model.load()
    args.env_settings = settings
    if not getattr(args, "settings_fill", True):
        return settings
    own: dict[str, Any] = getattr(args, "command_defaults", {})
    for name in model.model_fields:
        if getattr(args, name, "absent") is not None:
            continue  # given on the command line, or not a flag of this command
        value = getattr(settings, name) if settings.is_set(name) or name not in own else own[name]
        setattr(args, name, value.get_secret_value() if isinstance(value, SecretStr) else value)
    return settings
