"""Schema step v14 of the embedded engine (``punctual.engines.embedded.schema``): accepted runs.

A callback job's run is ``accepted`` while its target works (``punctual.model.callbacks``): an open
state, so the open-runs index is rebuilt to hold it (its WHERE names every open state, and a query
spelling the new list cannot use an index built for the old one), and a partial index of accepted
runs by deadline lets the reaper find the timed-out ones every few seconds without reading the open
runs of anything else (``Store.expired_acceptances``). A run that is never accepted never enters it.
"""

from __future__ import annotations

from punctual.model import OPEN_STATES

ACCEPTED_RUN_SQL = "state = 'accepted'"  # the partial index's WHERE, repeated verbatim by its query
# schema.OPEN_RUN_SQL, spelled here as schema spells it (it imports this module; a unit test holds
# the two equal: a query names the index's exact WHERE, or SQLite cannot use the index)
OPEN_RUN_SQL = "(" + " OR ".join(f"state = '{state.value}'" for state in sorted(OPEN_STATES)) + ")"
V14 = (
    "DROP INDEX runs_open",
    f"CREATE INDEX runs_open ON runs(deadline_at, scheduled_at) WHERE {OPEN_RUN_SQL}",
    f"CREATE INDEX runs_accepted ON runs(deadline_at) WHERE {ACCEPTED_RUN_SQL}",
)
