"""The audit log in admin lists the newest events first, as a log is read."""

import pytest
from django.urls import reverse

from audit.models import AuditEvent
from testsupport.factories import make_user

pytestmark = pytest.mark.django_db


def test_the_audit_log_lists_the_newest_event_first(client, awaiting_run):
    client.force_login(make_user("ada", superuser=True))
    response = client.get(reverse("admin:audit_auditevent_changelist"))
    assert response.status_code == 200
    shown = [event.pk for event in response.context["cl"].result_list]
    newest_first = list(AuditEvent.objects.order_by("-id").values_list("pk", flat=True))
    assert len(shown) > 2
    assert shown == newest_first[: len(shown)]
    assert shown[0] == AuditEvent.objects.latest("id").pk
