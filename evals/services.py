"""The services that change case sets, cases and eval runs: every write is here, in one
transaction with its audit event (``audit.services.audit_record``, on the ``system`` chain
with the case set's project).

Locks: adding or removing cases locks the case set's row (``select_for_update``), so two
writers move its ``version`` one after the other and each case's ``added_in`` is the version
that added it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction

from agentops.actors import Actor
from agentops.errors import InvalidInput
from audit.services import audit_record
from evals.expectations import expected_checked, score
from evals.models import Case, CaseSet, CaseSource, EvalResult, EvalRun
from evals.selectors import cases_at

# The most messages a case's conversation, and tool results it, may hold.
MAX_MESSAGES = 2000
MAX_TOOL_RESULTS = 2000


def case_set_create(*, project_id: int, name: str, description: str = "", actor: Actor) -> CaseSet:
    """A new, empty case set (version 0) named ``name`` in project ``project_id``.

    Raises:
        InvalidInput: ``name`` is empty or longer than 200 characters, or the project holds a
            case set of that name already.
    """
    name = name.strip() if isinstance(name, str) else ""
    if not name or len(name) > 200:
        raise InvalidInput("name must be 1 to 200 characters", field="name")
    try:
        with transaction.atomic():
            case_set = CaseSet.objects.create(
                project_id=project_id,
                name=name,
                description=description,
                created_by=actor.user,
            )
            audit_record(
                actor=actor,
                verb="case_set.created",
                object_type="case_set",
                object_id=case_set.pk,
                project_id=project_id,
                payload={"name": name},
            )
    except IntegrityError as exc:
        raise InvalidInput(f"a case set named {name!r} exists already", field="name") from exc
    return case_set


@dataclass(frozen=True)
class NewCase:
    """A case to add (``Case``'s fields; ``expected`` checked by ``case_checked``)."""

    name: str
    source: str
    conversation: list[dict[str, Any]]
    tool_results: list[dict[str, Any]]
    write_tools: list[str]
    expected: dict[str, Any]
    metadata: dict[str, Any]
    source_run_id: Any = None
    source_step_index: int | None = None


def case_checked(value: Any, where: str = "case") -> NewCase:
    """A case given as JSON (an exported line, an API body) checked: ``name``, ``source``,
    ``conversation`` (a list of message objects), ``tool_results`` (``{"tool", "args",
    "result"}`` objects), ``write_tools`` (names), ``expected`` and optional ``metadata``,
    ``source_run_id``, ``source_step_index``.

    Raises:
        InvalidInput: a part is missing or malformed (``field`` names it, prefixed by
            ``where``).
    """
    if not isinstance(value, dict):
        raise InvalidInput(f"{where} must be an object", field=where)
    name = value.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 300:
        raise InvalidInput(f"{where}.name must be 1 to 300 characters", field=where)
    conversation = value.get("conversation")
    if not isinstance(conversation, list) or len(conversation) > MAX_MESSAGES:
        raise InvalidInput(f"{where}.conversation must be a list of messages", field=where)
    if not all(isinstance(m, dict) for m in conversation):
        raise InvalidInput(f"{where}.conversation must hold message objects", field=where)
    results = value.get("tool_results", [])
    if not isinstance(results, list) or len(results) > MAX_TOOL_RESULTS:
        raise InvalidInput(f"{where}.tool_results must be a list", field=where)
    for result in results:
        if not (
            isinstance(result, dict)
            and isinstance(result.get("tool"), str)
            and isinstance(result.get("args"), dict)
        ):
            raise InvalidInput(
                f"{where}.tool_results: each is an object with tool and args", field=where
            )
    writes = value.get("write_tools", [])
    if not isinstance(writes, list) or not all(isinstance(w, str) for w in writes):
        raise InvalidInput(f"{where}.write_tools must be a list of tool names", field=where)
    metadata = value.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InvalidInput(f"{where}.metadata must be an object", field=where)
    source = value.get("source", CaseSource.IMPORT)
    if source not in CaseSource.values:
        raise InvalidInput(f"{where}.source is one of {', '.join(CaseSource.values)}", field=where)
    index = value.get("source_step_index")
    if index is not None and (not isinstance(index, int) or isinstance(index, bool) or index < 0):
        raise InvalidInput(f"{where}.source_step_index must be an index", field=where)
    return NewCase(
        name=name.strip(),
        source=source,
        conversation=conversation,
        tool_results=[
            {"tool": r["tool"], "args": r["args"], "result": r.get("result")} for r in results
        ],
        write_tools=sorted(set(writes)),
        expected=expected_checked(value.get("expected")),
        metadata=metadata,
        source_run_id=value.get("source_run_id"),
        source_step_index=index,
    )


def _next_version(case_set_id: int) -> CaseSet:
    """Case set ``case_set_id`` locked (``SELECT ... FOR UPDATE``) and moved to its next
    version; the caller's transaction holds the lock until it commits."""
    case_set = CaseSet.objects.select_for_update().get(pk=case_set_id)
    case_set.version += 1
    case_set.save(update_fields=["version", "updated_at"])
    return case_set


def _version_audited(actor: Actor, case_set: CaseSet, verb: str, payload: dict[str, Any]) -> None:
    audit_record(
        actor=actor,
        verb=verb,
        object_type="case_set",
        object_id=case_set.pk,
        project_id=case_set.project_id,
        to_state=f"v{case_set.version}",
        payload={**payload, "version": case_set.version},
    )


def cases_add(*, case_set_id: int, cases: list[NewCase], actor: Actor) -> list[Case]:
    """Add ``cases`` to case set ``case_set_id`` as its next version (one version for all of
    them; nothing changes when ``cases`` is empty).

    Raises:
        CaseSet.DoesNotExist: no such case set.
    """
    if not cases:
        return []
    with transaction.atomic():
        case_set = _next_version(case_set_id)
        made = Case.objects.bulk_create(
            Case(
                case_set=case_set,
                name=case.name,
                source=case.source,
                source_run_id=case.source_run_id,
                source_step_index=case.source_step_index,
                conversation=case.conversation,
                tool_results=case.tool_results,
                write_tools=case.write_tools,
                expected=case.expected,
                metadata=case.metadata,
                added_in=case_set.version,
            )
            for case in cases
        )
        _version_audited(actor, case_set, "case_set.cases_added", {"cases": [c.pk for c in made]})
    return made


def case_remove(*, case_id: int, actor: Actor) -> CaseSet:
    """Take case ``case_id`` out of its set from the set's next version on (earlier versions,
    and the eval runs that replayed them, keep it).

    Raises:
        Case.DoesNotExist: no such case.
        InvalidInput: the case is removed already.
    """
    with transaction.atomic():
        set_id = Case.objects.values_list("case_set_id", flat=True).get(pk=case_id)
        case_set = _next_version(set_id)
        # Read under the set's lock: a concurrent removal of the same case has committed.
        case = Case.objects.get(pk=case_id)
        if case.removed_in is not None:
            raise InvalidInput(f"case {case_id} was removed in v{case.removed_in}")
        case.removed_in = case_set.version
        case.save(update_fields=["removed_in"])
        _version_audited(actor, case_set, "case_set.case_removed", {"case": case_id})
    return case_set


def _outcome(value: Any, where: str) -> tuple[list[dict[str, Any]], str, str]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{where} must be an object", field="outcomes")
    calls = value.get("calls", [])
    if not isinstance(calls, list) or not all(
        isinstance(c, dict) and isinstance(c.get("tool"), str) and isinstance(c.get("args"), dict)
        for c in calls
    ):
        raise InvalidInput(f"{where}.calls: each is an object with tool and args", field="outcomes")
    final, error = value.get("final") or "", value.get("error") or ""
    if not isinstance(final, str) or not isinstance(error, str):
        raise InvalidInput(f"{where}: final and error are text", field="outcomes")
    made = [
        {"tool": c["tool"], "args": c["args"], "sandboxed": bool(c.get("sandboxed"))} for c in calls
    ]
    return made, final, error


def eval_run_record(
    *,
    case_set_id: int,
    version: int | None,
    agent_version: str,
    outcomes: list[dict[str, Any]],
    threshold: float | None = None,
    actor: Actor,
) -> EvalRun:
    """Score one replay of version ``version`` (None: the current one) of case set
    ``case_set_id`` by ``agent_version`` and keep it as an eval run.

    ``outcomes`` holds one object per case of that version: ``{"case": id, "calls":
    [{"tool", "args", "sandboxed"}, ...], "final": text, "error": text}`` (what
    ``agentops_client.evals.replay_case`` returns). ``threshold`` is a pass rate, 0..1.

    Raises:
        CaseSet.DoesNotExist: no such case set.
        InvalidInput: a bad label, version or threshold; an outcome that is malformed, names
            a case outside the version, repeats a case, or a case without an outcome.
    """
    if not isinstance(agent_version, str) or not agent_version.strip() or len(agent_version) > 200:
        raise InvalidInput("agent_version must be 1 to 200 characters", field="agent_version")
    if threshold is not None and not (
        isinstance(threshold, int | float)
        and not isinstance(threshold, bool)
        and 0 <= threshold <= 1
    ):
        raise InvalidInput("threshold must be a number from 0 to 1", field="threshold")
    if not isinstance(outcomes, list):
        raise InvalidInput("outcomes must be a list", field="outcomes")
    case_set = CaseSet.objects.get(pk=case_set_id)
    at = case_set.version if version is None else version
    if not isinstance(at, int) or isinstance(at, bool) or not 0 <= at <= case_set.version:
        raise InvalidInput(f"version must be 0 to {case_set.version}", field="version")
    cases = {case.pk: case for case in cases_at(case_set_id=case_set_id, version=at)}
    given: dict[int, tuple[list[dict[str, Any]], str, str]] = {}
    for i, outcome in enumerate(outcomes):
        case_id = outcome.get("case") if isinstance(outcome, dict) else None
        if case_id not in cases:
            raise InvalidInput(f"outcomes[{i}]: no case {case_id!r} in v{at}", field="outcomes")
        if case_id in given:
            raise InvalidInput(f"outcomes[{i}]: case {case_id} given twice", field="outcomes")
        given[case_id] = _outcome(outcome, f"outcomes[{i}]")
    missing = sorted(set(cases) - set(given))
    if missing:
        raise InvalidInput(f"no outcome for cases {missing[:20]}", field="outcomes")
    results = []
    for case_id, (made, final, error) in given.items():
        found = score(cases[case_id].expected, made, error, final)
        results.append(
            EvalResult(
                case_id=case_id, passed=found.passed, made=made, final=final, reason=found.reason
            )
        )
    with transaction.atomic():
        eval_run = EvalRun.objects.create(
            case_set=case_set,
            case_set_version=at,
            agent_version=agent_version.strip(),
            total=len(results),
            passed=sum(r.passed for r in results),
            threshold=threshold,
            created_by=actor.user,
        )
        for result in results:
            result.eval_run = eval_run
        EvalResult.objects.bulk_create(results)
        audit_record(
            actor=actor,
            verb="eval_run.recorded",
            object_type="eval_run",
            object_id=eval_run.pk,
            project_id=case_set.project_id,
            payload={
                "case_set": case_set.pk,
                "version": at,
                "agent_version": eval_run.agent_version,
                "passed": eval_run.passed,
                "total": eval_run.total,
            },
        )
    return eval_run
