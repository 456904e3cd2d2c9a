"""The API Gateway Lambda authorizer of the callback routes (``functions/callback_authorizer``).

A REQUEST authorizer in front of ``POST /runs/{run_id}/heartbeat`` and ``/complete`` only (every other
route stays IAM, SigV4): it verifies the ``X-Punctual-Callback-Token`` against the path's run id
(``punctual.runs.tokens``: the MAC of this deployment's key, nothing read) and answers with a policy
that allows exactly those two methods of that run. The token's attempt is judged by the API itself,
on the stored run (``punctual.execution.callbacks``): the authorizer keeps no state and its results
are not cached (a token must never outlive its attempt in a cache).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from punctual import ids
from punctual.errors import InvalidCallbackToken
from punctual.runs import tokens

ROUTES = ("heartbeat", "complete")


def authorize(event: Mapping[str, Any], key: bytes) -> dict[str, Any]:
    """The authorizer's answer to a REQUEST authorizer ``event``: an IAM policy allowing ``POST`` of
    the run's two callback routes (in this API and stage only). Raises :class:`InvalidCallbackToken`
    for a missing, malformed or forged token, or a path that names no run (the handler answers
    ``Unauthorized``: API Gateway's 401)."""
    run_id = str((event.get("pathParameters") or {}).get("run_id") or "")
    if not ids.is_run_id(run_id):
        raise InvalidCallbackToken("the path names no run", field="run_id")
    headers = {str(name).lower(): value for name, value in (event.get("headers") or {}).items()}
    claim = tokens.verify(key, run_id, headers.get(tokens.TOKEN_HEADER.lower()))
    stage = "/".join(str(event.get("methodArn") or "").split("/")[:2])  # arn:...:execute-api:...:<api>/<stage>
    return {
        "principalId": f"callback:{run_id}",
        "policyDocument": {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Action": "execute-api:Invoke",
                    "Effect": "Allow",
                    "Resource": [f"{stage}/POST/runs/{run_id}/{route}" for route in ROUTES],
                }
            ],
        },
        "context": {"run_id": run_id, "attempt": claim.attempt},
    }
