"""``punctual console --api-url URL``: the web console on 127.0.0.1 for any deployment's API.

Requests from the page are forwarded to ``URL`` signed with SigV4 (service ``execute-api``) with
the AWS credentials botocore finds (``--profile``, environment, SSO, instance role), or with an API
key (``--api-key``) for an API that takes keys. It prints ``Console: <url>``
with a per-run session token in the URL fragment; see :mod:`punctual.console.proxy`.
"""

from __future__ import annotations

import argparse
import ipaddress
import threading
from typing import Any
from urllib.parse import urlencode, urlsplit

from punctual.cli.common import configure_logging, stop_event_on_signals
from punctual.console import proxy
from punctual.errors import ConfigError
from punctual.local.server import BackgroundServer


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "console", help="serve the web console on 127.0.0.1 for a deployed API (requests signed with SigV4)"
    )
    parser.add_argument("--api-url", required=True, help="the API's base URL, e.g. the stack's ApiUrl output")
    parser.add_argument("--port", type=int, default=8090, help="local port (default 8090; 0 picks a free one)")
    parser.add_argument("--host", default="127.0.0.1", help="loopback address to listen on (default 127.0.0.1)")
    parser.add_argument("--region", help="the API's region (default: from the URL, else the AWS configuration)")
    parser.add_argument("--profile", help="AWS profile for the credentials (default: the usual chain)")
    parser.add_argument("--api-key", help="send this API key instead of signing (an API that takes keys)")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.verbose)
    if not _is_loopback(args.host):
        raise ConfigError("the console proxy signs requests with your credentials: it listens on loopback only")
    if urlsplit(args.api_url).scheme not in {"http", "https"}:
        raise ConfigError(f"--api-url must be an http(s) URL, not {args.api_url!r}")
    token = proxy.new_token()
    hosts: set[str] = set()
    app = proxy.proxy_app(args.api_url, signer_from_args(args), token, allowed_hosts=lambda: hosts)
    server = BackgroundServer(app, host=args.host, port=args.port)
    stop = stop_event_on_signals()
    url = server.start()
    hosts.update({f"{args.host}:{server.port}", f"localhost:{server.port}"})
    try:
        print(f"Console: {url}/console/#{urlencode({'key': token})}")
        print(f"Forwarding to {args.api_url} ({'API key' if _api_key(args) else 'SigV4, execute-api'})")
        print("Press Ctrl-C to stop.", flush=True)
        _wait(stop)
    finally:
        server.stop()
    return 0


def signer_from_args(args: argparse.Namespace) -> proxy.Signer:
    key = _api_key(args)
    if key:
        return proxy.BearerSigner(key)
    import boto3

    session = boto3.Session(profile_name=args.profile) if args.profile else boto3.Session()
    region = args.region or proxy.region_of(args.api_url) or session.region_name
    if not region:
        raise ConfigError("cannot tell the API's region: pass --region")
    return proxy.SigV4Signer(session.get_credentials(), region)


def _api_key(args: argparse.Namespace) -> str | None:
    return str(args.api_key) if args.api_key else None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _wait(stop: threading.Event) -> None:
    while not stop.wait(0.5):
        pass
