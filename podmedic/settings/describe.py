"""A process's variables for people: the ``--help`` epilog (defaults) and ``config show`` (values)."""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr

from podmedic.settings.base import ProcessSettings, variables


def _default(model: type[ProcessSettings], name: str) -> str:
    default = model.model_fields[name].default
    if default is None:
        return "unset"
    if isinstance(default, bool):
        return "1" if default else "0"
    return f"{default:g}" if isinstance(default, float) else str(default) or '""'


def help_epilog(model: type[ProcessSettings], process: str) -> str:
    """Every variable ``model`` reads, by group, with its default: for the end of ``--help``.

    A flag given on the command line wins over its variable.
    """
    lines = [f"environment (flags win; `podmedic config show {process}` prints the values in force):"]
    for title, names in model.groups():
        lines.append(f"  {title}")
        for name in names:
            field = model.model_fields[name]
            lines.append(f"    {', '.join(variables(field))}  [default: {_default(model, name)}]")
            lines.append(f"        {field.description}")
    return "\n".join(lines)


def settings_rows(settings: ProcessSettings) -> list[dict[str, Any]]:
    """One row per setting: group, variable(s), value (secrets hidden), where it came from, what it does."""
    rows = []
    for title, names in type(settings).groups():
        for name in names:
            field = type(settings).model_fields[name]
            value = getattr(settings, name)
            plain: Any = ("(set)" if value.get_secret_value() else None) if isinstance(value, SecretStr) \
                else list(value) if isinstance(value, tuple) else str(value) if hasattr(value, "__fspath__") \
                else value
            rows.append({"group": title, "setting": name, "variables": variables(field), "value": plain,
                         "shown": settings.shown(name), "source": settings.source(name),
                         "default": _default(type(settings), name), "description": field.description})
    return rows
