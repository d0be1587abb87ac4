"""``manage.py import_transcripts`` turns recorded conversations into started transcript runs."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditEvent
from runs.models import Run, RunStatus
from tests.conftest import DATA_DIR

pytestmark = pytest.mark.django_db

TRAJECTORIES = DATA_DIR / "trajectories.json"


def conversation(user_text: str, *, call_id: str = "call_1") -> list[dict]:
    return [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": user_text},
        {
            "role": "assistant",
            "content": "Looking it up.",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "get_user_details", "arguments": '{"user_id": "u1"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": "get_user_details", "content": "{}"},
    ]


def run_command(*args: str, capture) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    with capture(execute=True):
        call_command("import_transcripts", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_imports_tau_bench_conversations_as_started_runs(
    operator, django_capture_on_commit_callbacks
):
    out, _ = run_command(
        str(TRAJECTORIES),
        "--limit",
        "3",
        "--user",
        operator.username,
        capture=django_capture_on_commit_callbacks,
    )
    data = json.loads(TRAJECTORIES.read_text())[:3]
    runs = list(Run.objects.order_by("created_at"))
    assert len(runs) == 3
    assert "imported 3 of 3 conversations from trajectories.json (0 failed)" in out
    assert all(str(run.pk) in out for run in runs)
    for run, item in zip(runs, data, strict=True):
        first_user = next(m["content"] for m in item["traj"] if m["role"] == "user")
        assert run.agent == "transcript"
        assert run.requested_by == operator
        assert run.goal.startswith(f"Task {item['task_id']}, trial {item['trial']}: ")
        assert first_user[:50] in run.goal
        assert run.metadata == {
            "source": "trajectories.json",
            "task_id": item["task_id"],
            "trial": item["trial"],
            "reward": item["reward"],
        }
        calls = sum(len(m.get("tool_calls") or []) for m in item["traj"])
        assert run.steps.count() == calls
        assert run.status in {RunStatus.SUCCEEDED, RunStatus.WAITING}


def test_a_single_message_list_is_one_run_requested_by_the_importer(
    seeded, tmp_path, django_capture_on_commit_callbacks
):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(conversation("Where is my bag?")))
    run_command(str(path), capture=django_capture_on_commit_callbacks)
    run = Run.objects.get()
    assert run.goal == "Where is my bag?"
    assert run.requested_by is None
    assert run.metadata["source"] == "one.json"
    assert run.status == RunStatus.SUCCEEDED
    created = AuditEvent.objects.get(verb="run.created")
    assert (created.actor_kind, created.actor_name) == ("system", "import")


def test_long_first_message_is_trimmed_in_the_goal(
    seeded, tmp_path, django_capture_on_commit_callbacks
):
    path = tmp_path / "long.json"
    path.write_text(json.dumps([{"task_id": 7, "traj": conversation("word " * 200)}]))
    run_command(str(path), capture=django_capture_on_commit_callbacks)
    goal = Run.objects.get().goal
    assert goal.startswith("Task 7: word word")
    assert goal.endswith("…")
    assert len(goal) <= 220


def test_bad_conversation_is_reported_and_the_others_imported(
    seeded, tmp_path, django_capture_on_commit_callbacks
):
    broken = conversation("second")[:-1]  # the tool call has no recorded tool message
    path = tmp_path / "mixed.json"
    path.write_text(
        json.dumps(
            [
                {"task_id": 1, "traj": conversation("first")},
                {"task_id": 2, "traj": broken},
                "not a conversation",
                {"task_id": 4, "traj": conversation("fourth")},
            ]
        )
    )
    out, err = run_command(str(path), capture=django_capture_on_commit_callbacks)
    assert "imported 2 of 4 conversations from mixed.json (2 failed)" in out
    assert "conversation 1: " in err
    assert "no recorded tool message" in err
    assert "conversation 2: " in err
    assert sorted(r.metadata["task_id"] for r in Run.objects.all()) == [1, 4]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ('{"traj": []}', "expected a non-empty JSON list"),
        ("[]", "expected a non-empty JSON list"),
        ("[1, 2]", "no conversation"),
    ],
    ids=["missing", "not-json", "object", "empty", "no-conversations"],
)
def test_bad_file_is_a_clear_command_error(seeded, tmp_path, content, message):
    path = tmp_path / "input.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CommandError, match=message):
        call_command("import_transcripts", str(path), stdout=StringIO(), stderr=StringIO())
    assert not Run.objects.exists()


def test_unknown_user_is_a_command_error(seeded):
    with pytest.raises(CommandError, match="no user named 'nobody'"):
        call_command("import_transcripts", str(TRAJECTORIES), "--user", "nobody")
    assert not Run.objects.exists()
