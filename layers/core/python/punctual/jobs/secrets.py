"""Secret header values of a job's target: sealed (encrypted per owner) before they are stored,
opened again only to compare a replayed create."""

from __future__ import annotations

from punctual.errors import ConfigError, InvalidInput
from punctual.model import MAX_SECRET_CHARS, REDACTED, HttpTarget, JobSpec, Target
from punctual.port import Keys


def seal_secrets(spec: JobSpec, owner: str, keys: Keys | None, *, stored: Target | None) -> JobSpec:
    """``spec`` with its secret header values sealed by ``keys`` (the form that is stored).

    A value of REDACTED keeps the value ``stored`` has for that name (a PATCH that resends the
    target as it was read). Raises :class:`InvalidInput` for REDACTED with nothing to keep, a
    value over MAX_SECRET_CHARS, or secrets without keys (an engine always has keys).
    """
    target = spec.target
    if not isinstance(target, HttpTarget) or not target.secret_headers:
        return spec
    if keys is None:
        raise ConfigError("secret headers need the engine's keys")
    kept = stored.secret_headers if isinstance(stored, HttpTarget) else {}
    sealed: dict[str, str] = {}
    for name, value in target.secret_headers.items():
        if value == REDACTED:
            previous = next((v for k, v in kept.items() if k.lower() == name.lower()), None)
            if previous is None:
                raise InvalidInput(
                    f"secret header {name!r} is {REDACTED!r} but the job has no such secret to keep; send its value",
                    field="target.secret_headers",
                )
            sealed[name] = previous
        elif len(value) > MAX_SECRET_CHARS:
            raise InvalidInput(
                f"secret header {name!r} is longer than {MAX_SECRET_CHARS} characters", field="target.secret_headers"
            )
        else:
            sealed[name] = keys.seal(owner, value)
    return spec.model_copy(update={"target": target.model_copy(update={"secret_headers": sealed})})


def open_secrets(spec: JobSpec, owner: str, keys: Keys | None) -> JobSpec:
    """``spec`` with its sealed secret header values opened (to compare a replayed create)."""
    target = spec.target
    if not isinstance(target, HttpTarget) or not target.secret_headers or keys is None:
        return spec
    opened = {name: keys.open(owner, token) for name, token in target.secret_headers.items()}
    return spec.model_copy(update={"target": target.model_copy(update={"secret_headers": opened})})
