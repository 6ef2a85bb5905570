"""Reading podmedic's YAML files (policy, ingest settings) with errors that say where and why.

Both files share one error shape, ``(field path, reason)`` pairs, so the CLI prints them alike
and nothing already accepted is lost to a half-read file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar


class ConfigFileError(Exception):
    """A file that cannot be used; ``errors`` lists ``(field path, reason)``."""

    kind: ClassVar[str] = "file"

    def __init__(self, source: str, errors: list[tuple[str, str]]) -> None:
        self.source = source
        self.errors = errors
        lines = "\n".join(f"  {path}: {reason}" for path, reason in errors)
        super().__init__(f"invalid {self.kind} {source}:\n{lines}")


def read_text(path: Path, error: type[ConfigFileError]) -> str:
    """The file's text; an unreadable file raises ``error`` naming the OS's reason."""
    try:
        return path.read_text()
    except OSError as exc:
        raise error(str(path), [("(file)", f"cannot read: {exc.strerror}")]) from exc


def parse_yaml(text: str, source: str, error: type[ConfigFileError]) -> Any:
    """YAML to Python; a syntax error raises ``error`` with the line and column."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "(file)"
        raise error(source, [(where, f"not valid YAML: {getattr(exc, 'problem', None) or exc}")]) from exc
