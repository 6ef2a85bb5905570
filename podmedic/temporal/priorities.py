"""The task priorities podmedic gives Temporal, in one place for workflows, activities and the ingest.

Temporal dispatches a backlogged task queue by priority key (1 first, 3 by default). In a storm
the activities between a device's failure and its taint go first (``URGENT``), and so do the
workflow tasks of the workflows every incident waits on: a pool's fence (started by the ingest),
the fleet guard and the storm's turn-keeper (each started by the first incident that asks it),
whose tasks would otherwise queue behind a storm's new incidents. (A run continued as new keeps
its priority.) The steps after the fence (checkpoint, recovery, ticket,
close: ``AFTER_FENCE``) come after every workflow's tasks (3), so a new incident's first task is
not queued behind them; the pods' Events go last (``BACKGROUND``): nobody waits for them.
"""

from __future__ import annotations

from temporalio.common import Priority

URGENT = Priority(priority_key=1)
AFTER_FENCE = Priority(priority_key=4)
BACKGROUND = Priority(priority_key=5)
