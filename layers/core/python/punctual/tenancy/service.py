"""What operators and owners do with tenants: set, read and list limits, read usage, and the
``max_jobs`` check made when a job is created. No HTTP, no boto3 (the CLI and the API call this).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from punctual.errors import InvalidInput
from punctual.port import Store, Tenant
from punctual.tenancy import rates
from punctual.tenancy.limits import LIMIT_NAMES, Limits, effective

MAX_WEIGHT = 100
MAX_LIMIT = 100_000_000
SETTABLE = (*LIMIT_NAMES, "weight")


@dataclass(frozen=True, slots=True)
class Usage:
    """What the owner uses now, next to its limits (``GET /limits``)."""

    live_jobs: int  # active + paused jobs (what max_jobs bounds); counted up to max_jobs + 1 at most
    running: int | None  # runs holding a concurrency slot (None: no max_concurrency, not tracked)
    runs_this_minute: int | None  # starts counted in the current minute (None: no max_runs_per_minute)


@dataclass(frozen=True, slots=True)
class TenantView:
    owner: str
    record: Tenant | None  # what an operator set (None: nothing; the defaults apply)
    limits: Limits  # effective: the record over the deployment defaults


def set_tenant(store: Store, owner: str, changes: Mapping[str, Any], now: int) -> Tenant:
    """Change the owner's limits: each key of ``changes`` (a name of ``SETTABLE``) replaces that
    field, None resets it to the deployment default (weight: to 1). Other fields keep their value.

    Raises :class:`InvalidInput` for an unknown name or a value out of range; nothing is written then.
    """
    _check_owner(owner)
    unknown = sorted(set(changes) - set(SETTABLE))
    if unknown:
        raise InvalidInput(f"unknown limit(s) {', '.join(unknown)}; expected some of {', '.join(SETTABLE)}")
    for name, value in changes.items():
        _check_value(name, value)
    current = store.get_tenant(owner) or Tenant(owner=owner)
    values: dict[str, Any] = {n: (1 if n == "weight" and v is None else v) for n, v in changes.items()}
    tenant = replace(current, **{**values, "updated_at": now})
    store.put_tenant(tenant)
    return tenant


def view(store: Store, owner: str, defaults: Limits) -> TenantView:
    """The owner's record (if any) and its effective limits."""
    _check_owner(owner)
    record = store.get_tenant(owner)
    return TenantView(owner, record, effective(record, defaults))


def list_views(store: Store, defaults: Limits) -> list[TenantView]:
    """Every owner with a tenant record, with its effective limits, by owner."""
    return [TenantView(t.owner, t, effective(t, defaults)) for t in store.list_tenants()]


def usage(store: Store, owner: str, limits: Limits, now: int) -> Usage:
    """The owner's current usage. Counting live jobs reads at most ``max_jobs + 1`` index rows
    (unlimited owners: at most ``MAX_COUNTED_JOBS``)."""
    bound = MAX_COUNTED_JOBS if limits.max_jobs is None else limits.max_jobs + 1
    running = None if limits.max_concurrency is None else len(store.slot_holders(owner))
    started = None
    if limits.max_runs_per_minute is not None:
        started = rates.started_in_last_minute(store, owner, now)
    return Usage(live_jobs=store.count_live_jobs(owner, bound), running=running, runs_this_minute=started)


MAX_COUNTED_JOBS = 10_000


def _check_owner(owner: str) -> None:
    if not owner or len(owner) > 512 or not owner.isprintable():
        raise InvalidInput("owner must be 1-512 printable characters", field="owner")


def _check_value(name: str, value: Any) -> None:
    if value is None:
        return
    top = MAX_WEIGHT if name == "weight" else MAX_LIMIT
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
        raise InvalidInput(
            f"{name} must be a whole number from 1 to {top} (or null: the deployment default)", field=name
        )
