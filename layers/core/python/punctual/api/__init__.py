"""The HTTP API (API Gateway REST + Lambda, or the local server): routes, schemas, errors, auth.

``punctual.api.app.handle(event, context, services)`` answers one API Gateway REST (v1) proxy
event; ``functions/api/handler.py`` and ``punctual.local.server`` both call it. Edge checks
(identity, size, media type, strict JSON) are in ``edges``; errors map to HTTP in ``errors`` only.
May import: the kernels, ``punctual.jobs``, and for its other routers ``punctual.runs`` (stats),
``punctual.tenancy`` (limits, rates), ``punctual.dependencies`` (graphs) and
``punctual.execution.targets`` (the settings' target policy, signing secrets) and
``punctual.execution.callbacks`` (the callback routes' writes); never an engine module directly (the
port only).
"""
