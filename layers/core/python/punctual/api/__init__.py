"""The HTTP API (API Gateway REST + Lambda, or the local server): routes, schemas, errors, auth.

``punctual.api.app.handle(event, context, services)`` answers one API Gateway REST (v1) proxy
event; ``functions/api/handler.py`` and ``punctual.local.server`` both call it.
"""
