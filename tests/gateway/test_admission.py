"""The gateway's admission of a request (``gateway.admission.admit``): a token it admitted is
admitted again without the database, and refused from the next request on once it is revoked
or expires, its user loses the role or is deactivated, or the upstream is disabled."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from gateway import admission
from gateway.admission import Admitted, admit
from gateway.services import upstream_register
from projects.models import ApiToken
from projects.services import membership_set, project_default, token_rotate
from testsupport.factories import make_token
from testsupport.processes import free_port

pytestmark = pytest.mark.django_db

# The upstream, the token with its user, the user's memberships.
CHECK_QUERIES = 3
ADDRESS = "203.0.113.7"


@pytest.fixture
def upstream(seeded: None):
    return upstream_register(name="adm-up", command="true")


def _admitted(django_assert_num_queries, token: str, queries: int) -> Admitted:
    with django_assert_num_queries(queries):
        found = admit("adm-up", f"Bearer {token}", ADDRESS)
    assert isinstance(found, Admitted)
    return found


def _refused(token: str, name: str = "adm-up") -> int:
    found = admit(name, f"Bearer {token}", ADDRESS)
    assert not isinstance(found, Admitted)
    return found[0]


def test_an_admitted_token_is_admitted_again_without_the_database(
    upstream, operator, django_assert_num_queries
):
    token = make_token(operator)
    first = _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    again = _admitted(django_assert_num_queries, token, 0)
    assert again == first
    assert first.caller.actor.id == str(operator.pk)
    assert first.caller.project_id == project_default().pk
    assert first.upstream.pk == upstream.pk
    # Another header of the same token is admitted on its own: the upstream is read again, the
    # token and its user's memberships are those the token check kept (``agentops.tokens``).
    with django_assert_num_queries(1):
        assert isinstance(admit("adm-up", f"Token {token}", ADDRESS), Admitted)


def test_a_revoked_token_is_refused_at_once(upstream, operator, django_assert_num_queries):
    token = make_token(operator)
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    ApiToken.objects.filter(user=operator).delete()
    assert _refused(token) == 401


def test_a_rotated_token_is_refused_at_once(upstream, operator, django_assert_num_queries):
    token = make_token(operator)
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    token_rotate(token=ApiToken.objects.get(user=operator))
    assert _refused(token) == 401


def test_a_token_is_refused_once_it_expires(
    upstream, operator, django_assert_num_queries, monkeypatch
):
    token = make_token(operator, ttl_seconds=60)
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    later = timezone.now() + timedelta(seconds=61)
    monkeypatch.setattr(admission.timezone, "now", lambda: later)
    assert _refused(token) == 401


def test_a_lost_role_or_a_deactivated_user_is_refused_at_once(
    upstream, operator, django_assert_num_queries
):
    token = make_token(operator)
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    membership_set(project=project_default(), user=operator, role="viewer")
    assert _refused(token) == 403
    membership_set(project=project_default(), user=operator, role="operator")
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    operator.is_active = False
    operator.save()
    assert _refused(token) == 401


def test_a_disabled_upstream_is_refused_at_once(upstream, operator, django_assert_num_queries):
    token = make_token(operator)
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    upstream.enabled = False
    upstream.save()
    assert _refused(token) == 404


def test_without_the_shared_cache_every_request_is_checked(
    upstream, operator, django_assert_num_queries, settings
):
    token = make_token(operator)
    # Redis cannot be reached: a port nothing listens on.
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    settings.CACHES = {n: {**c, "LOCATION": unreachable} for n, c in settings.CACHES.items()}
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
    _admitted(django_assert_num_queries, token, CHECK_QUERIES)
