"""The web console: a browser UI at ``/console`` over the public HTTP API only.

Owns the static page (``static/``: HTML, CSS, the app's JavaScript and the vendored npm libraries
with their licences, see :mod:`.vendor`), the Starlette routes that serve it with a strict
Content-Security-Policy (:mod:`.web`, mounted by ``punctual.local.server`` for ``punctual dev``
and ``punctual api``), and the signing proxy behind ``punctual console --api-url``
(:mod:`.proxy`: SigV4 for a deployed stack). The console adds no endpoint of its own: the page
calls the same API routes as any client, with the caller's credentials.
"""
