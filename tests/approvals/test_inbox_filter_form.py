"""``InboxFilter`` builds its form class once: every filter set still gets a form of its own,
bound to its own data, with fields of its own."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from approvals.filters import InboxFilter
from approvals.models import ApprovalRequest

pytestmark = pytest.mark.django_db


def test_each_filter_set_has_its_own_form_and_fields() -> None:
    queryset = ApprovalRequest.objects.all()
    first = InboxFilter(QueryDict("risk=nonsense&tool=echo"), queryset=queryset)
    second = InboxFilter(None, queryset=queryset)
    assert type(first.form) is type(second.form)
    assert first.form is not second.form
    assert first.form.fields["risk"] is not second.form.fields["risk"]
    first.form.fields["risk"].choices = [("only", "only")]
    assert [value for value, _ in second.form.fields["risk"].choices] == [
        "",
        "low",
        "medium",
        "high",
        "critical",
    ]
    assert not first.form.is_valid()
    assert set(first.form.errors) == {"risk"}
    assert first.form.cleaned_data["tool"] == "echo"
    assert not second.form.is_bound
