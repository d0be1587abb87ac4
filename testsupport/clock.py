"""A host whose clock is off: this process's ``django.utils.timezone.now`` (what agentops and
Django's ``auto_now`` fields read) moved by some seconds, while the database's clock is
right, as on a host whose clock drifted."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from unittest import mock

from django.utils import timezone


@contextmanager
def clock_off_by(seconds: float) -> Iterator[None]:
    """Inside the block, this process's clock is ``seconds`` ahead of the database's (behind
    when negative)."""
    real = timezone.now

    def skewed() -> datetime:
        return real() + timedelta(seconds=seconds)

    with mock.patch.object(timezone, "now", skewed):
        yield
