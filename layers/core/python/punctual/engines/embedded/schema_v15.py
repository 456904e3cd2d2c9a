"""Schema v15 of the embedded engine (``punctual.engines.embedded.schema`` applies it): priority in
the queue.

Each message carries its run's job's priority (``Dispatch.priority``; 5 for every message sent
before, and where a sender does not give it), and an owner's visible messages are handed out
highest priority first, then oldest visible first (``punctual.engines.embedded.queue``). The one
queue index gains the priority between the owner and the visibility, descending, so that the
hand-out reads it in its order: one seek per priority, no sort.
"""

from __future__ import annotations

V15 = (
    "ALTER TABLE queue ADD COLUMN pri INTEGER NOT NULL DEFAULT 5",
    "DROP INDEX queue_group_visible",
    "CREATE INDEX queue_group_visible ON queue(queue, grp, pri DESC, visible_at, id)",
)
