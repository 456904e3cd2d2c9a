"""Local serving: the API (and, in ``punctual dev``, every component) on one machine."""
