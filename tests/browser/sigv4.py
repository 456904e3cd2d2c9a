"""A stand-in for API Gateway's IAM authorization: verify a request's SigV4 signature, written from
the AWS specification (hashlib/hmac, not botocore), so it checks the signer rather than repeating it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import UTC, datetime
from urllib.parse import quote

_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<akid>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request,"
    r"\s*SignedHeaders=(?P<signed>[a-z0-9;-]+),\s*Signature=(?P<signature>[0-9a-f]{64})$"
)
MAX_SKEW_S = 300


def verify(
    method: str,
    path: str,
    query: list[tuple[str, str]],
    headers: dict[str, str],
    body: bytes,
    secrets: dict[str, str],
    region: str,
    service: str = "execute-api",
) -> tuple[str | None, str | None]:
    """(access key id, None) if the request is signed by a known key for ``service`` in ``region``;
    (None, reason) otherwise. ``headers`` has lower-case names."""
    match = _AUTH.match(headers.get("authorization", ""))
    if match is None:
        return None, "missing or malformed SigV4 Authorization header"
    akid, date, scope_region, scope_service = match["akid"], match["date"], match["region"], match["service"]
    if scope_service != service or scope_region != region:
        return None, f"signed for {scope_service} in {scope_region}"
    if akid not in secrets:
        return None, "unknown access key"
    amz_date = headers.get("x-amz-date", "")
    try:
        signed_at = datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None, "missing X-Amz-Date"
    if amz_date[:8] != date or abs((datetime.now(UTC) - signed_at).total_seconds()) > MAX_SKEW_S:
        return None, "signature date out of range"
    signed = match["signed"].split(";")
    if "host" not in signed or any(name not in headers for name in signed):
        return None, "a signed header is missing"
    canonical_query = "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(query))
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed)
    canonical_request = "\n".join(
        [
            method,
            quote(path, safe="/~"),
            canonical_query,
            canonical_headers,
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])
    key = ("AWS4" + secrets[akid]).encode()
    for part in (date, region, service, "aws4_request"):
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, match["signature"]):
        return None, "signature does not match"
    return akid, None
