"""Classifying edited arguments again: a reviewer who approves a waiting call with arguments
they edited gets those arguments classified as a fresh call with them would be (the step
policy, ``runs.gates.step_policy``, with the risk rules as they are now), and a stricter
outcome makes the approval start over.

Why: the policy is decided when the step is created and copied onto its request, so without
this, a call of ``amount 5`` under a one-approval rule could be approved with ``amount
5000000`` by one reviewer, where a fresh call with that amount needs two.

The rule (``reclassify``; ``approvals.services.approval_decide`` applies it):

- no stricter (same or lower risk, and ``ApprovalPolicy.stricter_than`` finds nothing): the
  request keeps its policy and the editor's approval counts first towards it, as before;
- stricter in any way (higher risk, more approvals, another or a narrower group of approvers,
  requesters kept out, expiry failing the run): the request starts over under
  ``ApprovalPolicy.tightened_by`` (the fresh policy, never asking less than the old one), with
  a new time to live, reminder and escalation from now, its approvers notified again. The
  editor's approval does not count, and the editor may not decide it at all
  (``ApprovalPolicy.edited_by``): they proposed this call, and four eyes keep whoever proposes
  a call from approving it, as they keep whoever asked for the step (unless the policy lets
  requesters decide).

Either way an ``approval.reclassified`` audit event keeps the policy before, the fresh
classification, what made it stricter and whether the request started over, in the
transaction of the edit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from agentops.actors import Actor
from approvals.models import ApprovalRequest
from approvals.policy import APPROVAL_GATE, ApprovalPolicy
from runs.gates import StepRequest, step_policy
from runs.models import Risk, Run, Step

# Risks from the least to the most (the order ``Risk`` declares them in).
RISK_ORDER: list[str] = list(Risk.values)


def _project_of_run(run_id: object) -> int:
    return Run.objects.values_list("project_id", flat=True).get(pk=run_id)


def _fresh(step: Step, current: ApprovalPolicy) -> tuple[str, ApprovalPolicy]:
    """The risk and approval policy the step policy gives a fresh call of ``step``'s tool with
    its (edited) arguments; a call that waited because its run crossed its budget still does
    (``StepPolicy.escalate``). ``current`` when the step policy sends it to no approval gate."""
    request = StepRequest(
        step.tool,
        step.args,
        edited=True,
        declared_risk=step.declared_risk,
        project_id=_project_of_run(step.run_id),
    )
    policy = step_policy()
    (found,) = policy.classify([request])
    if step.budget_crossing:
        message = str(step.budget_crossing.get("message", "its run crossed its budget"))
        found = policy.escalate(request, found, f"approval to continue: {message}") or found
    if found.gate != APPROVAL_GATE:
        return found.risk, current
    return found.risk, ApprovalPolicy.from_json(found.params)


@dataclass(frozen=True)
class Reclassification:
    """What classifying a waiting call's edited arguments again gives: ``stricter``, in
    words, how the fresh classification asks more than the request's policy (empty: in no
    way); when it does, the ``risk`` and ``policy`` the request starts over under (else the
    request's own); ``audit``, the payload of its ``approval.reclassified`` event."""

    stricter: list[str]
    risk: str
    policy: ApprovalPolicy
    audit: dict[str, object]


def reclassify(*, approval: ApprovalRequest, step: Step, editor: Actor) -> Reclassification:
    """Classify the arguments of ``step`` again (``editor`` has just edited them) and compare
    the outcome with the pending ``approval`` of the step (see the module's docstring). Reads
    the risk rules; changes nothing."""
    old_risk, old = approval.risk, approval.rule
    risk, fresh = _fresh(step, old)
    stricter = fresh.stricter_than(old)
    if RISK_ORDER.index(risk) > RISK_ORDER.index(old_risk):
        stricter.insert(0, f"{risk} risk (was {old_risk})")
    audit: dict[str, object] = {
        "from": {"risk": old_risk, "policy": old.as_json()},
        "classified": {"risk": risk, "policy": fresh.as_json()},
        "stricter": stricter,
        "restarted": bool(stricter),
    }
    if not stricter:
        return Reclassification(stricter, old_risk, old, audit)
    policy = replace(
        old.tightened_by(fresh, edited_by=editor.user.pk if editor.user else None),
        reason=f"arguments edited by {editor.name} need a stricter approval "
        f"({'; '.join(stricter)}): {fresh.reason}",
    )
    risk = max(risk, old_risk, key=RISK_ORDER.index)
    audit["to"] = {"risk": risk, "policy": policy.as_json()}
    audit["editor_approval"] = "not counted: whoever edits the arguments may not decide"
    return Reclassification(stricter, risk, policy, audit)
