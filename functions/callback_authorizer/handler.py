"""Callback authorizer Lambda: the REQUEST authorizer of ``POST /runs/{run_id}/heartbeat|complete``
around ``punctual.api.authorizer.authorize``. Its key is derived once per execution environment
(one KMS GenerateMac); importing this module does no I/O. The token is never logged.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from punctual.api.authorizer import authorize
from punctual.config import EngineKind, Settings
from punctual.engines.aws import AwsClients, keys_of
from punctual.errors import InvalidCallbackToken

logger = Logger(service="punctual-callback-authorizer")


@cache
def callback_key() -> bytes:
    """The deployment's callback-token key (``Keys.callback_key``), from the environment the CDK app sets."""
    settings = Settings.from_env(engine=EngineKind.AWS)
    return keys_of(settings, AwsClients(region=settings.region)).callback_key()


def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    try:
        return authorize(event, callback_key())
    except InvalidCallbackToken as exc:
        logger.info("callback refused: %s", exc.message)
        raise Exception("Unauthorized") from None  # API Gateway answers 401 to exactly this message
