"""Refusals of malformed input that say what was wrong and where."""

from __future__ import annotations

from pydantic import ValidationError


class EventError(Exception):
    """Input that cannot become an observation; ``problems`` lists ``(where, what)``.

    ``where`` is a path into the input (``[3].data.health``), so a sender of a batch of a
    thousand events learns which one, which field, and why.
    """

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        if not problems:
            raise ValueError("an EventError needs at least one problem")
        self.problems = problems
        super().__init__("; ".join(f"{where}: {what}" for where, what in problems))

    def as_json(self) -> dict[str, object]:
        """The body of a 400 answer."""
        return {"error": "malformed input", "problems": [{"where": w, "what": m} for w, m in self.problems]}


def path_of(prefix: str, loc: tuple[int | str, ...]) -> str:
    """``prefix`` followed by a pydantic error location, as ``a.b[2].c``."""
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(body)"


def from_validation(prefix: str, exc: ValidationError) -> EventError:
    """An ``EventError`` with one problem per pydantic error, located under ``prefix``."""
    return EventError([(path_of(prefix, tuple(err["loc"])), err["msg"]) for err in exc.errors()])
