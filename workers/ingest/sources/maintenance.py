"""Announced maintenance on nodes: the start time GKE writes as a node label (``podmedic/domain/maintenance.py``).

Per node the source remembers the notice it last delivered (the label's value, by its event id). A new or
changed value is a ``MaintenanceNotice`` with its deadline; the label gone from a node that had one (the
maintenance withdrawn, or begun) is a notice with none; a value that is no time is delivered with what was
wrong, and the incident it opens says so (a node label is not for podmedic to correct).
"""

from __future__ import annotations

import datetime as dt

from podmedic.domain.base import Obj
from podmedic.domain.maintenance import notice_of
from workers.ingest.sources.cursor import Memory
from workers.ingest.sources.watch_loop import Change, ClusterSource, Observation


class MaintenanceSource(ClusterSource):
    """Turns nodes' maintenance labels into ``MaintenanceNotice``s."""

    name = "maintenance"
    kind = "nodes"

    _announced: dict[str, str]  # node -> the event id of the notice last delivered

    def change(self, kind: str, obj: Obj) -> Change:
        """A notice when the node's announced maintenance changed; none otherwise."""
        name = str((obj.get("metadata") or {}).get("name") or "")
        before = self._announced.get(name)
        if kind == "DELETED":
            obj = {**obj, "metadata": {**(obj.get("metadata") or {}), "labels": {}}}
        notice = notice_of(obj, before is not None, dt.datetime.now(dt.UTC))
        if notice is None or notice.event_id == before:
            return Change()
        announced = notice.deadline is not None or bool(notice.problem)
        observations: list[Observation] = [notice]

        def apply() -> None:
            if announced:
                self._announced[name] = notice.event_id
            else:
                self._announced.pop(name, None)

        return Change(observations, apply)

    def missing(self, listed: list[Obj]) -> Change:
        """Nodes deleted while the watch was away: their maintenance is over (a notice with none each)."""
        present = {str((o.get("metadata") or {}).get("name") or "") for o in listed}
        gone = [n for n in self._announced if n not in present]
        changes = [self.change("DELETED", {"metadata": {"name": n}}) for n in gone]
        observations = [o for c in changes for o in c.observations]

        def forget() -> None:
            for node in gone:
                self._announced.pop(node, None)

        return Change(observations, forget)

    def memory(self) -> Memory:
        """``{"announced": {node: event id}}``."""
        return {"announced": dict(self._announced)}

    def restore(self, memory: Memory) -> None:
        """Take back ``memory()`` as saved with the cursor."""
        announced = memory.get("announced") or {}
        self._announced = {str(k): str(v) for k, v in announced.items()} if isinstance(announced, dict) else {}
