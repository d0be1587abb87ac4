"""The pages' ``timesince``, ``timeuntil``, ``floatformat`` and ``date`` filters
(``agentops.jinja2``) print what Django's print, in every language and time zone, although
they keep translated or formatted texts between calls or format without Django's machinery."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.template import defaultfilters
from django.utils import timezone, translation

from agentops.jinja2 import date, floatformat, timesince, timeuntil

NOW = datetime(2026, 5, 1, 14, 3, 7, tzinfo=UTC)
DELTAS = [
    timedelta(0),
    timedelta(seconds=59),
    timedelta(minutes=1),
    timedelta(minutes=9, seconds=30),
    timedelta(hours=1, minutes=3),
    timedelta(hours=23, minutes=59),
    timedelta(days=1),
    timedelta(days=9, hours=2),
    timedelta(days=45),
    timedelta(days=400, hours=3),
    timedelta(days=-2),
]
VALUES = [
    Decimal("0"),
    Decimal("-0"),
    Decimal("0.0000"),
    Decimal("0.01235"),
    Decimal("1.10"),
    Decimal("1234.5"),
    0,
    -0.0,
    0.0,
    2.5,
    -1,
    True,
]


@pytest.mark.parametrize("language", ["en", "de", "fr"])
def test_times_read_as_djangos_in_each_language(language: str) -> None:
    # The same numbers in another language: a text kept without its language would repeat
    # the first language's words.
    for active in ("en", language):
        with translation.override(active):
            for delta in DELTAS:
                moment = NOW - delta
                assert timesince(moment, NOW) == defaultfilters.timesince_filter(moment, NOW)
                assert timeuntil(moment, NOW) == defaultfilters.timeuntil_filter(moment, NOW)
                assert timesince(moment) == defaultfilters.timesince_filter(moment)
    with translation.override("de"):
        assert timesince(NOW - timedelta(minutes=9), NOW) == "9\xa0Minuten"


def test_empty_times_print_nothing() -> None:
    value: Any
    for value in (None, ""):
        assert timesince(value) == defaultfilters.timesince_filter(value) == ""
        assert timeuntil(value) == defaultfilters.timeuntil_filter(value) == ""


@pytest.mark.parametrize("language", ["en", "de"])
def test_numbers_read_as_djangos_in_each_language(language: str) -> None:
    for active in ("en", language):
        with translation.override(active):
            for value in [*VALUES, "x", None, [1]]:
                for arg in (4, -2, "2g"):
                    assert floatformat(value, arg) == defaultfilters.floatformat(value, arg)
    with translation.override("de"):
        assert floatformat(Decimal("0.5"), 4) == "0,5000"


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/St_Johns"])
def test_dates_read_as_djangos_in_each_time_zone(zone: str) -> None:
    moments = [
        NOW,
        datetime(2026, 3, 29, 1, 30, 5, 999999, tzinfo=UTC),
        datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC),
        datetime(2026, 12, 31, 23, 59, 59),  # noqa: DTZ001 (naive: printed as it is)
    ]
    with timezone.override(zone):
        for moment in moments:
            for arg in ("Y-m-d H:i:s", "c", "Y-m-d"):
                local = timezone.template_localtime(moment)  # type: ignore[attr-defined]
                assert date(moment, arg) == defaultfilters.date(local, arg)
    with timezone.override("Europe/Paris"):
        assert date(NOW, "Y-m-d H:i:s") == "2026-05-01 16:03:07"
        assert (
            date(datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "Y-m-d H:i:s") == "0999-01-02 03:13:26"
        )
