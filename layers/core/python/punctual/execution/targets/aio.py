"""Targets on the worker's event loop: the same kinds and rules as :class:`~punctual.execution.targets.Targets`.

HTTP targets go through :mod:`punctual.execution.targets.wire` (our asyncio HTTP/1.1 client), with
the SSRF guard, the headers and the answer rules of :mod:`punctual.execution.targets.http`, so the
two paths cannot drift: only the transport differs. The AWS kinds use boto3, which blocks: they run
on a small thread pool, never on the loop.

Names are resolved on the thread pool too (``getaddrinfo`` blocks), unless one was checked in the
last few seconds (:mod:`punctual.execution.targets.resolutions`); a literal address is checked in
place. Either way the connection goes to the address that was checked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache, partial
from typing import Any

from punctual.execution.targets import Targets, http, signing, wire
from punctual.execution.targets.abilities import Cancellable, Reply
from punctual.execution.targets.policy import TargetPolicy
from punctual.execution.targets.request_rules import TargetRefused, TargetUrl, check_headers, target_url
from punctual.execution.targets.resolutions import RESOLUTIONS, Resolutions
from punctual.execution.targets.types import Invocation, TargetResult, failed, timed_out, unbuildable
from punctual.execution.targets.wire import Answer, Request, WireError, WirePool
from punctual.execution.targets.wire_call import Volley
from punctual.execution.targets.wire_parse import NoConnectionInTime
from punctual.model import Completion, HttpTarget, Job, Run
from punctual.port import Keys

logger = logging.getLogger(__name__)

WARM_TIMEOUT_S = 10.0  # a connection opened ahead of its calls that takes longer is given up
WARM_COUNTS_KEPT_MS = 60_000  # the calls warmed for per instant and key, kept this long after a later instant


class AsyncTargets:
    """Executes attempts on the running event loop; one instance per loop (its pool is the loop's).

    ``blocking`` runs what must not run on the loop (DNS for names, the AWS kinds); ``sync`` is the
    blocking dispatcher used for the AWS kinds (built from ``policy`` if not given).
    """

    def __init__(
        self,
        policy: TargetPolicy | None = None,
        *,
        sync: Targets | None = None,
        blocking: ThreadPoolExecutor | None = None,
        max_connections_per_host: int = 1024,
        keys: Keys | None = None,
        resolutions: Resolutions = RESOLUTIONS,
        callback_base_url: str | None = None,
    ) -> None:
        self.policy = policy or TargetPolicy()
        self.callback_base_url = callback_base_url  # the API's, for callback jobs (punctual.runs.tokens)
        self.resolutions = resolutions  # names checked recently (the process's, by default)
        self.keys = keys  # opens secret headers and signs HTTP requests (the engine's keys)
        self._sync = sync or Targets(self.policy, keys=keys, callback_base_url=callback_base_url)
        # requests built ahead of their instant, by (run id, attempt): (the job version, the request)
        self._prebuilt: dict[tuple[str, int], tuple[int, Request]] = {}
        self._warm_counts: dict[tuple[int, wire.PoolKey], int] = {}  # (instant, key) -> its calls warmed for
        self._warm_newest = 0
        self._blocking = blocking or ThreadPoolExecutor(max_workers=16, thread_name_prefix="punctual-targets")
        pool_size = max_connections_per_host
        self._pool = WirePool(tls=http.tls_context(), max_idle_per_key=pool_size, max_per_key=pool_size)

    async def execute(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        """Execute one attempt within ``timeout_s``. Never raises: an unexpected error becomes a
        retryable failure (as :meth:`Targets.execute`)."""
        if timeout_s <= 0:
            return timed_out(0)
        request = self._ready(job, run, attempt)
        if request is None:
            return await self._unready(job, run, attempt, timeout_s)
        try:
            answer = await self._pool.send(request, timeout_s=timeout_s, excerpt_bytes=http.EXCERPT_BYTES)
        except Exception as exc:
            return _failure(exc, job, timeout_s)
        return _result(answer)

    def call(self, job: Job, run: Run, attempt: int, timeout_s: float, reply: Reply) -> Cancellable:
        """:meth:`execute` by callback: ``reply`` gets the result (never from within this method),
        or ``asyncio.CancelledError`` once the call returned was cancelled.

        An HTTP attempt built ahead (:meth:`prebuild`) or to a literal address, the common case,
        is written at once (or queued for a connection) and answered by the pool's callbacks, with
        no task or coroutine of its own; anything else runs :meth:`execute` in a task."""
        request = self._ready(job, run, attempt) if timeout_s > 0 else None
        if request is None:
            return in_task(self.execute(job, run, attempt, timeout_s), reply)
        replied = partial(_replied, reply, job, timeout_s)
        return self._pool.call(request, timeout_s=timeout_s, excerpt_bytes=http.EXCERPT_BYTES, reply=replied)

    def volley(self, opens_in_s: float) -> Volley:
        """A volley for calls armed ahead of an instant ``opens_in_s`` seconds from now (:meth:`arm`)."""
        return Volley(asyncio.get_running_loop().time() + max(0.0, opens_in_s))

    def arm(
        self, job: Job, run: Run, attempt: int, timeout_s: float, reply: Reply, *, volley: Volley
    ) -> Cancellable | None:
        """:meth:`call`, made ahead of its instant and held by ``volley`` until :meth:`release`
        (``timeout_s`` counts from the volley's ``opens_at``); None for an attempt that is not an HTTP
        request ready to write (:meth:`call` starts it at the instant, as any other)."""
        request = self._ready(job, run, attempt) if timeout_s > 0 else None
        if request is None:
            return None
        replied = partial(_replied, reply, job, timeout_s)
        return self._pool.arm(
            request, timeout_s=timeout_s, excerpt_bytes=http.EXCERPT_BYTES, reply=replied, volley=volley
        )

    def release(self, volley: Volley) -> None:
        """Let the calls of ``volley`` go (the instant came); those cut meanwhile are dropped."""
        self._pool.release(volley)

    def _ready(self, job: Job, run: Run, attempt: int) -> Request | None:
        """The request of an HTTP attempt built ahead (for the job's current version), to a literal
        address the policy allows or to a name checked in the last few seconds; None for everything
        else, which :meth:`_unready` handles (names are resolved off the loop; errors become results
        there)."""
        target = job.target
        if not isinstance(target, HttpTarget):
            return None
        if self._prebuilt:
            built = self._prebuilt.pop((run.run_id, attempt), None)
            if built is not None and built[0] == job.version:  # unchanged job: as built
                return built[1]
        try:
            url = target_url(target.url)
            if url.literal:  # no DNS: the verdict on a literal address never changes, so it is kept
                address, _ = _literal_verdict(url.host, url.port, self.policy)
            else:  # a name checked in the last few seconds; else it is resolved off the loop
                address = self.resolutions.get(url.host, url.port, self.policy)
            if address is None:
                return None
            # KNOWN LIMIT: on the aws engine the first use per owner and secret in a process
            # makes one KMS call on the loop (cached afterwards); running it in the blocking
            # pool instead made leases expire in tests/faults/test_worker_kill.py, not yet
            # understood. ``Keys.at_hand`` tells the two cases apart for that follow-up.
            return self._build(job, run, attempt, url, address)
        except Exception:  # _unready meets the same problem and answers it
            return None

    def _build(self, job: Job, run: Run, attempt: int, url: TargetUrl, address: str) -> Request:
        """The request of an HTTP attempt to the checked ``address``; a job without headers of its
        own (most) is written from one template, without an :class:`Invocation` (the same bytes)."""
        target = job.target
        assert isinstance(target, HttpTarget)
        if target.headers or target.secret_headers or job.completion is not Completion.RESPONSE:
            invocation = Invocation.of(job, run, attempt, self.keys, self.callback_base_url)
            return _request(target, invocation, url, address)
        method = target.method
        body = http.encode_payload(job.payload) if method in http.METHODS_WITH_BODY else None
        block = signing.plain_block(
            url.netloc,
            run.run_id,
            job.id,
            attempt=attempt,
            scheduled_at=run.scheduled_at,
            secret=self.keys.signing_secret(job.owner) if self.keys is not None else None,
            body=body,
            method=method,
            path=url.path,
            v1=signing.signs_v1(target.signature),
            now_s=int(time.time()),
        )
        return Request(method, (url.scheme, url.host, address, url.port), wire.encode(method, url.path, block, body))

    async def _unready(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        """An attempt :meth:`_ready` left: another kind, a name to resolve, or one that fails."""
        try:
            try:
                invocation = Invocation.of(job, run, attempt, self.keys, self.callback_base_url)
            except TargetRefused as exc:  # a callback job this worker cannot call back for
                return unbuildable(exc.message)
            except ValueError as exc:  # a secret sealed under another key: retrying cannot fix it
                return failed(f"a secret header of the job does not open: {exc}", retryable=False)
            except Exception as exc:  # KMS unavailable: transient
                return failed(f"cannot open the job's secrets: {type(exc).__name__}", retryable=True)
            target = job.target
            if not isinstance(target, HttpTarget):
                return await self._blocking_kind(job, run, attempt, timeout_s)
            url = target_url(target.url)
            if not url.literal:
                return await self._resolved(target, invocation, url, timeout_s)
            address, refusal = _literal_verdict(url.host, url.port, self.policy)
            if address is None:
                return failed(f"refused by the target policy: {refusal}", retryable=False)
            request = _request(target, invocation, url, address)
            answer = await self._pool.send(request, timeout_s=timeout_s, excerpt_bytes=http.EXCERPT_BYTES)
        except Exception as exc:
            return _failure(exc, job, timeout_s)
        return _result(answer)

    def close(self) -> None:
        self._pool.close()
        self._prebuilt.clear()

    def prebuild(self, job: Job, run: Run, attempt: int) -> None:
        """Build an HTTP attempt's request ahead of its instant (a pre-leased run), off the loop, so
        that at the instant only its write is left; :meth:`execute` sends it if the job is still at
        the same version. Thread-safe, best effort: whatever is unusual (another kind of target, a
        secret that does not open, an address refused or not resolved) is left to :meth:`execute`.
        The address is checked here (SSRF guard) and the request is pinned to it, as in execute.
        """
        target = job.target
        if not isinstance(target, HttpTarget) or job.completion is not Completion.RESPONSE:
            return  # a callback job's token names its lease: built when leased
        try:
            url = target_url(target.url)
            if url.literal:
                address, _ = _literal_verdict(url.host, url.port, self.policy)
            else:
                address = self.resolutions.get(url.host, url.port, self.policy) or http.resolve(
                    url.host, url.port, self.policy, cache=self.resolutions
                )
            if address is None:
                return
            request = self._build(job, run, attempt, url, address)
        except Exception:  # execute() meets the same problem and answers it
            return
        self._prebuilt[(run.run_id, attempt)] = (job.version, request)

    def forget(self, run: Run, attempt: int) -> None:
        """Drop a request built for an attempt that will not be executed here."""
        self._prebuilt.pop((run.run_id, attempt), None)

    def warm(self, attempts: Sequence[tuple[str, int]], instant: int = 0) -> int:
        """On the loop: open the connections the prebuilt requests of ``attempts`` (run id, attempt)
        will use, one per attempt and key at most (:meth:`WirePool.warm`), before their instant.
        The attempts of one ``instant`` (epoch ms) held in several receives are counted together:
        a key has one connection per call of the instant, however the receives split them
        (``instant`` 0: these attempts alone). Returns how many connections are being opened."""
        per_key: dict[wire.PoolKey, tuple[Request, int]] = {}
        for key in attempts:
            built = self._prebuilt.get(key)
            if built is not None:
                request = built[1]
                first, count = per_key.get(request.key, (request, 0))
                per_key[request.key] = (first, count + 1)
        counts = self._warm_counts
        if instant > self._warm_newest:  # the counts of instants long past are dropped
            self._warm_newest = instant
            for old in [k for k in counts if k[0] < instant - WARM_COUNTS_KEPT_MS]:
                del counts[old]
        opened = 0
        for pool_key, (request, count) in per_key.items():
            total = count if not instant else counts.get((instant, pool_key), 0) + count
            if instant:
                counts[(instant, pool_key)] = total
            opened += self._pool.warm(request, total, timeout_s=WARM_TIMEOUT_S)
        return opened

    async def _blocking_kind(self, job: Job, run: Run, attempt: int, timeout_s: float) -> TargetResult:
        """An AWS kind, through the blocking dispatcher on the thread pool."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s  # loop.time() is time.monotonic(), what Targets expects
        call = loop.run_in_executor(self._blocking, self._sync.execute, job, run, attempt, deadline)
        try:
            async with asyncio.timeout(timeout_s):
                return await call
        except TimeoutError:
            return timed_out(timeout_s)

    async def _resolved(
        self, target: HttpTarget, invocation: Invocation, url: TargetUrl, timeout_s: float
    ) -> TargetResult:
        """An HTTP attempt to a name not checked recently: resolved and checked on the thread pool
        (and kept), then sent to the checked address within what is left of ``timeout_s``."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            resolve = partial(http.resolve, url.host, url.port, self.policy, cache=self.resolutions)
            address = await loop.run_in_executor(self._blocking, resolve)
        except http.Refused as exc:
            return failed(f"refused by the target policy: {exc}", retryable=False)
        except OSError as exc:  # DNS failure: often transient
            return failed(f"cannot resolve {url.host}: {exc}", retryable=True)
        remaining = timeout_s - (loop.time() - started)
        if remaining <= 0:
            return timed_out(timeout_s)
        request = _request(target, invocation, url, address)
        # an error of the call is answered by _unready (_failure), as for a literal address
        return _result(await self._pool.send(request, timeout_s=remaining, excerpt_bytes=http.EXCERPT_BYTES))


def _failure(exc: Exception, job: Job, timeout_s: float) -> TargetResult:
    """What an error of an attempt's call comes to (a target must never take the worker down)."""
    if isinstance(exc, NoConnectionInTime):  # never written: the host's connections were all busy
        busy = "every one was busy (--max-connections-per-host)"
        return failed(f"no connection to the target's host within {timeout_s:g} s: {busy}", retryable=True)
    if isinstance(exc, TimeoutError):
        return timed_out(round(timeout_s, 3))
    if isinstance(exc, TargetRefused | UnicodeError):  # no request can be built: retrying cannot fix it
        return unbuildable(exc.message if isinstance(exc, TargetRefused) else f"{type(exc).__name__}: {exc}")
    if isinstance(exc, (WireError, OSError)):
        return failed(f"{type(exc).__name__}: {exc}", retryable=True)
    logger.error("target %s of job %s raised", job.target.type, job.id, exc_info=exc)
    return failed(f"{type(exc).__name__}: {exc}", retryable=True)


def _replied(reply: Reply, job: Job, timeout_s: float, outcome: Answer | BaseException) -> None:
    """The pool's reply to :meth:`AsyncTargets.call`, as a result."""
    if isinstance(outcome, Exception):
        reply(_failure(outcome, job, timeout_s))
    elif isinstance(outcome, BaseException):  # cancelled
        reply(outcome)
    else:
        reply(_result(outcome))


def in_task(attempt: Coroutine[Any, Any, TargetResult], reply: Reply) -> asyncio.Future[TargetResult]:
    """Run ``attempt`` (an :meth:`AsyncTargetExecutor.execute`) in a task that tells ``reply`` how it ended."""
    task = asyncio.ensure_future(attempt)
    task.add_done_callback(partial(_task_replied, reply))
    return task


def _task_replied(reply: Reply, task: asyncio.Future[TargetResult]) -> None:
    """The reply of an attempt that ran in a task (:func:`in_task`)."""
    if task.cancelled():
        reply(asyncio.CancelledError())
    else:
        error = task.exception()
        reply(task.result() if error is None else error)


def _result(answer: Answer) -> TargetResult:
    status = answer.status
    location = answer.headers.get("location") if 300 <= status < 400 else None  # only a redirect's is told
    return http.result_of(status, http.excerpt_text(answer.body) if answer.body else None, location)


def _request(target: HttpTarget, invocation: Invocation, url: TargetUrl, address: str) -> Request:
    """The request of one attempt, encoded, to the checked ``address``. Raises :class:`TargetRefused`
    for a header no request can carry (a job stored before ``request_rules`` refused it)."""
    check_headers(target.headers)
    check_headers(invocation.secret_headers, "target.secret_headers")
    method = target.method
    body = http.encode_payload(invocation.payload) if method in http.METHODS_WITH_BODY else None
    block = signing.header_block(
        target.headers,
        invocation,
        url.netloc,
        body,
        method=method,
        path=url.path,
        v1=signing.signs_v1(target.signature),
        now_s=int(time.time()),
    )
    return Request(method, (url.scheme, url.host, address, url.port), wire.encode(method, url.path, block, body))


@lru_cache(maxsize=4096)
def _literal_verdict(host: str, port: int, policy: TargetPolicy) -> tuple[str | None, str | None]:
    """(address, None) if the policy allows the literal address ``host``, else (None, why not)."""
    try:
        return http.resolve(host, port, policy), None
    except http.Refused as exc:
        return None, str(exc)
