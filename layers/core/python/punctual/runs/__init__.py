"""Operations on one run that the scheduler, the worker and the reaper share.

Owns owner alerts (``alerts``: recorded once, sent by an ``Alerter``), cancellation of an open run
and the deleted-job test (``cancel``), and the retry rules (``retry``: verdicts, backoff, jitter).
May import: the kernels only. The pure lifecycle rules themselves live in ``punctual.rules``.
"""
