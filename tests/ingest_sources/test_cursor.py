"""The cursor file: atomic, throttled, and unreadable files mean a relist, never a crash."""

from __future__ import annotations

import json
from pathlib import Path

from workers.ingest.sources.cursor import Cursor


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_advance_writes_at_most_once_per_interval_and_flush_writes_the_last(tmp_path: Path) -> None:
    clock = Clock()
    cursor = Cursor.in_dir(tmp_path, "src", min_interval_s=5.0, clock=clock)
    cursor.advance("10", lambda: {"n": 10})
    cursor.advance("11", lambda: {"n": 11})
    clock.now += 1
    cursor.advance("12", lambda: {"n": 12})
    assert cursor.writes == 1
    saved = cursor.load()
    assert saved is not None and (saved.resource_version, saved.memory) == ("10", {"n": 10})
    clock.now += 5
    cursor.advance("13", lambda: {"n": 13})
    assert cursor.writes == 2
    cursor.advance("14", lambda: {"n": 14})
    cursor.flush()
    saved = cursor.load()
    assert saved is not None and (saved.resource_version, saved.memory) == ("14", {"n": 14})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["watch-src.json"], "no temporary file left behind"


def test_drop_pending_forgets_an_unwritten_position(tmp_path: Path) -> None:
    cursor = Cursor.in_dir(tmp_path, "src", min_interval_s=60.0)
    cursor.advance("5", dict)
    cursor.advance("6", dict)
    cursor.drop_pending()
    cursor.flush()
    saved = cursor.load()
    assert saved is not None and saved.resource_version == "5"


def test_unusable_files_mean_no_cursor(tmp_path: Path) -> None:
    cursor = Cursor.in_dir(tmp_path, "src")
    assert cursor.load() is None
    for text in ("{not json", json.dumps({"format": 99, "resourceVersion": "3"}), json.dumps([1]),
                 json.dumps({"format": 1, "resourceVersion": ""})):
        (tmp_path / "watch-src.json").write_text(text)
        assert cursor.load() is None, text


def test_no_state_dir_keeps_nothing(tmp_path: Path) -> None:
    cursor = Cursor.in_dir(None, "src", min_interval_s=0)
    cursor.advance("3", dict)
    cursor.flush()
    assert cursor.load() is None and cursor.writes == 0
