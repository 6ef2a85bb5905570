"""Hypothesis building blocks shared by the property tests of everything podmedic parses."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)


def damage(draw: st.DrawFn, body: Any, replacements: st.SearchStrategy[Any], most: int = 3) -> Any:
    """Replace or delete up to ``most`` things anywhere in ``body`` (in place), so most inputs
    stay near-valid and reach the parser's deeper checks; returns ``body``."""
    for _ in range(draw(st.sampled_from([0, 0, 0, *range(1, most + 1)]))):
        target: Any = body
        while isinstance(target, dict | list) and target and draw(st.booleans()):
            key = draw(st.sampled_from(list(target) if isinstance(target, dict) else list(range(len(target)))))
            if not isinstance(target[key], dict | list):
                break
            target = target[key]
        if isinstance(target, dict) and target:
            key = draw(st.sampled_from(list(target)))
            if draw(st.booleans()):
                del target[key]
            else:
                target[key] = draw(replacements)
        elif isinstance(target, list) and target:
            target[draw(st.integers(0, len(target) - 1))] = draw(replacements)
    return body
