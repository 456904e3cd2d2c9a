"""``GET /signing-secret``: the caller's request-signing secret, to verify the calls of their jobs.

Every HTTP attempt carries ``Punctual-Signature: t=<unix s>,v2=<hex HMAC-SHA256>`` over the
request (method, host, path and query, job, run, body), with the older ``v1=<hex>`` (run and body
only) beside it until 0.2.0 (``punctual.execution.targets.signing``; ``docs/api.md`` shows how to
verify it). The secret is the owner's own: derived by the engine's keys (KMS on AWS), the same in
every process, never stored, and only ever shown to its owner.
"""

from __future__ import annotations

from aws_lambda_powertools.event_handler.api_gateway import Router
from pydantic import BaseModel, Field

from punctual.api import openapi
from punctual.api.caller import caller
from punctual.errors import ConfigError
from punctual.execution.targets.signing import DEFAULT_TOLERANCE_S, SCHEME, SIGNATURE_HEADER, V1_UNTIL
from punctual.port import Keys

SIGNED_V2 = (
    "v2\\n<t>\\n<X-Punctual-Run-Id>\\n<X-Punctual-Job-Id>\\n<METHOD>\\n<host[:port], lower case, no default port>"
    "\\n<path and query as sent>\\n<raw body>"
)
router = Router()  # type: ignore[no-untyped-call]  # Powertools leaves __init__ unannotated


class SigningSecret(BaseModel):
    """How the caller's HTTP targets can check that a call came from this deployment."""

    secret: str = Field(description="HMAC-SHA256 key: the string itself, UTF-8 encoded (psk_...)")
    header: str = Field(description="the request header carrying the signature")
    scheme: str = Field(description="the signature's scheme in that header (t=<unix s>,v2=<hex>)")
    signed: str = Field(description="what is signed: one field a line (\\n), then the raw body")
    signed_v1: str = Field(description="what v1 signs, sent beside v2 until v1_until unless the job opts out")
    v1_until: str = Field(description="the release from which a job that does not ask for v1 gets v2 alone")
    tolerance_s: int = Field(description="the age beyond which a receiver should refuse a call (replay)")


@router.get(
    "/signing-secret",
    operation_id="getSigningSecret",
    tags=["signing"],
    summary="The caller's request-signing secret (verify Punctual-Signature on your targets)",
    responses=openapi.responses({200: ("The secret and how it signs", SigningSecret)}, (401, 422, 500)),
)
def get_signing_secret() -> SigningSecret:
    keys, owner = _caller()
    return SigningSecret(
        secret=keys.signing_secret(owner),
        header=SIGNATURE_HEADER,
        scheme=SCHEME,
        signed=SIGNED_V2,
        signed_v1="<t>.<X-Punctual-Run-Id>.<raw body>",
        v1_until=V1_UNTIL,
        tolerance_s=DEFAULT_TOLERANCE_S,
    )


def _caller() -> tuple[Keys, str]:
    services, owner = caller(router.context)
    keys = services.keys
    if keys is None:
        raise ConfigError("the API was called without the engine's keys")
    return keys, owner
