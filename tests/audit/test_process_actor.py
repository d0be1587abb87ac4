"""The system actor of a process is named after the program it was started as, however it was
launched: ``celery`` whether started by its script or ``python -m celery``, never the
``__main__.py`` a ``-m`` launch leaves in ``sys.argv[0]``."""

from __future__ import annotations

import sys
import types
from importlib.machinery import ModuleSpec

import pytest

from audit.context import current_actor, process_name


@pytest.mark.parametrize(
    ("argv", "main_module", "expected"),
    [
        (["/srv/venv/bin/celery", "-A", "agentops", "worker"], None, "celery"),
        (
            ["/usr/lib/python3/celery/__main__.py", "-A", "agentops", "worker"],
            "celery.__main__",
            "celery",
        ),
        (["/srv/venv/bin/pytest", "-q"], None, "pytest"),
        (["/usr/lib/python3/pytest/__main__.py", "-q"], "pytest.__main__", "pytest"),
        (["/srv/tools/sweep.py"], "tools.sweep", "tools.sweep"),
        (["manage.py", "createsuperuser", "--noinput"], None, "manage.py createsuperuser"),
        (["/usr/lib/python3/django/__main__.py", "migrate"], "django.__main__", "django migrate"),
        (["-c"], None, "python"),
        ([""], None, "python"),
    ],
)
def test_the_process_is_named_after_its_program_however_it_was_started(
    monkeypatch: pytest.MonkeyPatch, argv: list[str], main_module: str | None, expected: str
) -> None:
    main = types.ModuleType("__main__")
    main.__spec__ = ModuleSpec(main_module, None) if main_module else None
    monkeypatch.setitem(sys.modules, "__main__", main)
    monkeypatch.setattr(sys, "argv", argv)
    assert process_name() == expected
    actor = current_actor()
    assert (actor.kind, actor.name) == ("system", expected)
