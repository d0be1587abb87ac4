"""``manage.py run_eval CASE_SET --agent MODULE:CALLABLE [--agent-version V] [--threshold R]``:
replay the current version of a case set with an agent callable of this process
(``agentops_client.evals``), record the eval run and print its results; exit status 1 when the
pass rate is below ``--threshold`` (0..1), for CI."""

from __future__ import annotations

from typing import Any

from agentops_client.evals import load_agent, replay_case
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentops.actors import Actor
from agentops.errors import InvalidInput
from evals.models import CaseSet
from evals.selectors import case_payload, cases_at
from evals.services import eval_run_record


class Command(BaseCommand):
    help = "Replay a case set against an agent version and score it."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("case_set", type=int, help="the case set's id")
        parser.add_argument("--agent", required=True, help="MODULE:CALLABLE")
        parser.add_argument("--agent-version", default="", help="label (default: --agent)")
        parser.add_argument("--threshold", type=float, default=None, help="a pass rate, 0..1")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            case_set = CaseSet.objects.get(pk=options["case_set"])
            agent = load_agent(options["agent"])
        except CaseSet.DoesNotExist as exc:
            raise CommandError(f"no case set {options['case_set']}") from exc
        except (ImportError, AttributeError, ValueError) as exc:
            raise CommandError(f"cannot load the agent: {exc}") from exc
        cases = cases_at(case_set_id=case_set.pk, version=case_set.version)
        outcomes = [replay_case(case_payload(case), agent) for case in cases]
        try:
            eval_run = eval_run_record(
                case_set_id=case_set.pk,
                version=case_set.version,
                agent_version=options["agent_version"] or options["agent"],
                outcomes=outcomes,
                threshold=options["threshold"],
                actor=Actor.system("run_eval"),
            )
        except InvalidInput as exc:
            raise CommandError(exc.message) from exc
        for result in eval_run.results.select_related("case"):
            mark = "pass" if result.passed else "FAIL"
            self.stdout.write(f"{mark}  {result.case.name}  {result.reason}")
        summary = f"eval run {eval_run.pk}: {eval_run.passed}/{eval_run.total} passed"
        self.stdout.write(f"{summary} ({eval_run.pass_rate:.1%})")
        if eval_run.below_threshold:
            raise CommandError(f"pass rate {eval_run.pass_rate:.1%} below {eval_run.threshold}")
