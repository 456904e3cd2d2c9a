"""The IAM proof: every permission exercised, not read (issue 27).

moto does not enforce IAM on DynamoDB, KMS or SNS resources (its access control checks SQS, IAM
and STS resources only, and takes the API name, e.g. TransactWriteItems, for the action), so the
proof records instead: each synthesized stack is deployed into moto (``iam_world``), each component
(every role that runs Punctual code: the api, scheduler, worker and reaper functions, the Fargate
worker services) runs through its entry point in the environment the stack gives it
(``iam_harness``, ``iam_scenarios``), and every AWS call it makes is recorded as IAM authorizes it
(``iam_calls``). Each component's calls are then checked against its role's statements in the
template (``iam_grants``): a call no statement allows fails (AccessDenied in production), and so
does a statement no call used, unless ``iam_grants.UNEXERCISED`` names it with the reason only
production exercises it.

Stacks: the default (open index, stats counters), the plan's without the open index (the
``plan_closed`` stack: the deploy line ``punctual capacity --jobs 10000000 --peak-runs-per-second
20000 --no-open-index`` prints, with ``stats_counters=false``, and the reaper sweeping with Scan)
and the options stack (Fargate workers with a long-run queue, AWS targets, open_index=false).
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pytest

from tests.infra import iam_scenarios as scenario
from tests.infra.iam_calls import Call, Recorder, iam_requests
from tests.infra.iam_grants import UNEXERCISED, Grant, Resolver, Verdict, check, unclassified_roles
from tests.infra.iam_harness import Stack, TargetServer
from tests.infra.synth import Synth

pytestmark = pytest.mark.infra

PUT = "dynamodb:PutItem"


@dataclass
class Proof:
    """One stack after every component ran: its grants and calls per component, and the verdicts."""

    template: dict[str, Any]
    components: list[str]
    role_ids: dict[str, str]
    grants: dict[str, list[Grant]]
    calls: dict[str, set[Call]]
    resolve: Resolver

    def verdict(self, component: str, grants: list[Grant] | None = None) -> Verdict:
        chosen = self.grants[component] if grants is None else grants
        return check(component, chosen, self.calls.get(component, set()), self.resolve.kind)


def prove(template: dict[str, Any]) -> Proof:
    """Deploy ``template`` into moto, run every component's scenario, and collect what it called."""
    from moto import mock_aws

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    recorder = Recorder()
    with mock_aws(), recorder.installed():
        stack = Stack(template, recorder)
        target = TargetServer()
        try:
            scenario.api(stack, target)
            scenario.scheduler(stack, target)
            scenario.lambda_worker(stack, target)
            scenario.reaper(stack, target)
            for name in stack.components:
                if name.startswith("fargate"):
                    scenario.fargate_worker(stack, target, name)
            grants = {name: stack.grants(name) for name in stack.components}
        finally:
            target.close()
            stack.close()
    return Proof(
        template=dict(template),
        components=sorted(stack.components),
        role_ids={name: c.role_id for name, c in stack.components.items()},
        grants=grants,
        calls=recorder.by_component(),
        resolve=stack.world.resolve,
    )


@pytest.fixture(scope="module", params=["default", "plan_closed", "options"])
def proof(request: pytest.FixtureRequest) -> Proof:
    synth: Synth = request.getfixturevalue(f"{request.param}_synth")
    assert synth.error is None, synth.error
    return prove(synth.template)


# -- the proof -----------------------------------------------------------------------------------------


def test_every_role_either_runs_punctual_code_or_is_listed_with_a_reason(proof: Proof) -> None:
    assert {"api", "scheduler", "worker", "reaper"} <= set(proof.components)
    assert unclassified_roles(proof.template, proof.role_ids.values()) == []


def test_every_component_ran(proof: Proof) -> None:
    silent = [name for name in proof.components if not proof.calls.get(name)]
    assert not silent, f"components that made no AWS call (their scenario did not run them): {silent}"
    assert not [c for calls in proof.calls.values() for c in calls if c.action == "unmapped"], (
        "calls the IAM mapping does not know (tests/infra/iam_calls.py): add them"
    )


def test_no_component_makes_a_call_its_role_does_not_allow(proof: Proof) -> None:
    reports = [proof.verdict(name).report(name) for name in proof.components if proof.verdict(name).missing]
    assert not reports, "\n".join(reports)


def test_every_grant_is_used_or_excused_with_a_reason(proof: Proof) -> None:
    reports = [proof.verdict(name).report(name) for name in proof.components if proof.verdict(name).unused]
    assert not reports, "\n".join(reports)


def test_every_excuse_is_needed(proof: Proof) -> None:
    """An UNEXERCISED entry that excuses nothing in a stack where its components exist is stale."""
    excused = {reason for name in proof.components for _, reason in proof.verdict(name).allowed}
    stale = [a.reason for a in UNEXERCISED if a.components & set(proof.components) and a.reason not in excused]
    assert not stale, f"remove these from UNEXERCISED: {stale}"


# -- the proof catches what it is for -------------------------------------------------------------------


def test_a_missing_grant_fails_the_proof(proof: Proof) -> None:
    # Given the reaper's grants without PutItem on the runs table (issue 27 item 4, before the fix)
    runs = [g for g in proof.grants["reaper"] if (g.action, proof.resolve.kind(g.resource)) == (PUT, "table:runs")]
    assert runs, "the reaper may insert the runs a burial releases"
    without = [g for g in proof.grants["reaper"] if g not in runs]
    # Then the burial that releases a dependent is a call no statement allows
    missing = proof.verdict("reaper", without).missing
    assert {(c.action, proof.resolve.kind(c.resource)) for c in missing} == {(PUT, "table:runs")}


def test_an_unused_grant_fails_the_proof(proof: Proof) -> None:
    # Given the scheduler's grants with DeleteItem on the jobs table added
    jobs = next(g.resource for g in proof.grants["scheduler"] if proof.resolve.kind(g.resource) == "table:jobs")
    extra = Grant("dynamodb:DeleteItem", jobs, "a test's extra statement")
    # Then that statement is reported as unused
    assert extra in proof.verdict("scheduler", [*proof.grants["scheduler"], extra]).unused


# -- the mapping from API calls to IAM requests --------------------------------------------------------


def test_transactions_and_batches_are_authorized_per_item_action() -> None:
    transact = {
        "TransactItems": [
            {"Put": {"TableName": "jobs"}},
            {"Update": {"TableName": "leases"}},
            {"ConditionCheck": {"TableName": "jobs"}},
        ]
    }
    assert iam_requests("dynamodb", "TransactWriteItems", transact, "us-east-1") == [
        ("dynamodb:PutItem", "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"),
        ("dynamodb:UpdateItem", "arn:aws:dynamodb:us-east-1:123456789012:table/leases"),
        ("dynamodb:ConditionCheckItem", "arn:aws:dynamodb:us-east-1:123456789012:table/jobs"),
    ]
    query = {"TableName": "runs", "IndexName": "open"}
    assert iam_requests("dynamodb", "Query", query, "us-east-1") == [
        ("dynamodb:Query", "arn:aws:dynamodb:us-east-1:123456789012:table/runs/index/open")
    ]
    batch = {"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/123456789012/q", "Entries": []}
    assert iam_requests("sqs", "SendMessageBatch", batch, "us-east-1") == [
        ("sqs:SendMessage", "arn:aws:sqs:eu-west-1:123456789012:q")
    ]
    assert iam_requests("dynamodb", "ExecuteStatement", {}, "us-east-1") == []  # unknown: fails the proof


def test_calls_are_recorded_as_the_component_whose_client_made_them_on_any_thread() -> None:
    import boto3
    from moto import mock_aws

    recorder = Recorder()
    with mock_aws(), recorder.installed():
        session = boto3.session.Session(region_name="us-east-1")
        setup = session.client("sqs")  # made outside any component: not recorded
        url = setup.create_queue(QueueName="q")["QueueUrl"]
        with recorder.acting_as("worker"):
            worker = session.client("sqs")
        with ThreadPoolExecutor(1) as pool:  # used later, on another thread: still the worker's
            pool.submit(worker.send_message_batch, QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "x"}]).result()
        setup.send_message(QueueUrl=url, MessageBody="y")
    assert [str(c) for c in recorder.calls] == [
        "worker: sqs:SendMessage on arn:aws:sqs:us-east-1:123456789012:q (via sqs:SendMessageBatch)"
    ]
