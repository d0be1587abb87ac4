"""Twenty reviewers deciding one approval at once over the API: one decision, nineteen 409s."""

import pytest

from agentops.actors import Actor
from approvals.models import ApprovalDecision, ApprovalRequest
from runs.executor.entry import run_advance
from runs.models import Run
from tests.api.conftest import approval_url, email_step, plan_body, post_run, token_client
from testsupport.concurrency import run_together
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db(transaction=True)


def test_parallel_approve_and_reject_calls_count_once(operator_api, held_messages):
    post_run(operator_api, **plan_body(email_step(), goal="mail"))

    run_advance(run_id=Run.objects.get().pk, actor=Actor.system())
    approval = ApprovalRequest.objects.get()
    clients = [token_client(make_user(f"rev{i}", "reviewer")) for i in range(20)]
    responses = run_together(
        [
            lambda c=c, i=i: c.post(
                approval_url(approval.pk, "approve" if i % 2 else "reject"),
                {"comment": f"reviewer {i}"},
                format="json",
            )
            for i, c in enumerate(clients)
        ]
    )
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [409] * 19, codes
    assert ApprovalDecision.objects.filter(approval=approval).count() == 1
