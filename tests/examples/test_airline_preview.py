"""The airline writes' dry run: what a call would change (balances, payments, reservations),
computed without changing anything, and what the real call then changes."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from examples.airline import tools
from examples.airline.store import Store
from tests.examples.test_airline_replay import AIRLINE_DSN, DATA

USER = "chen_jackson_3290"
GIFT_CARD = "gift_card_3576581"  # 245 on the card in the data files


@pytest.fixture(scope="module")
def store():
    opened = Store(AIRLINE_DSN, DATA)
    yield opened
    opened.close()


@pytest.fixture
def world(store: Store) -> str:
    name = f"test:{uuid.uuid4().hex}"
    store.create_world(name)
    return name


def cheap_flight() -> dict[str, Any]:
    """An available flight whose economy seat costs at most 100, from the data files."""
    flights = json.loads((DATA / "flights.json").read_text())
    for number, flight in sorted(flights.items()):
        for date, on_date in sorted(flight["dates"].items()):
            if on_date["status"] == "available" and on_date["prices"]["economy"] <= 100:
                return {
                    "flight_number": number,
                    "date": date,
                    "origin": flight["origin"],
                    "destination": flight["destination"],
                    "price": on_date["prices"]["economy"],
                }
    raise AssertionError("no cheap available flight in the data files")


def test_a_cancellation_preview_shows_the_refunds_and_changes_nothing(store, world):
    before = store.documents(world)
    seen = tools.preview(store, world, "cancel_reservation", {"reservation_id": "4WQ150"})
    assert store.documents(world) == before
    assert store.effects(world) == []
    changes = {c["field"]: c for c in seen["changes"] if c["document"] == "reservations/4WQ150"}
    assert changes["status"] == {
        "document": "reservations/4WQ150",
        "field": "status",
        "before": None,
        "after": "cancelled",
    }
    paid = before["reservations"]["4WQ150"]["payment_history"]
    assert changes["payment_history"]["added"] == [
        {"payment_id": p["payment_id"], "amount": -p["amount"]} for p in paid
    ]
    # The real call then does what the preview said.
    output = tools.call(
        store, world, "cancel_reservation", {"reservation_id": "4WQ150"}, idempotency_key="k"
    )
    assert output == seen["outcome"]
    assert store.documents(world)["reservations"]["4WQ150"]["status"] == "cancelled"


def test_a_booking_preview_shows_the_gift_card_balance_and_the_new_reservation(store, world):
    flight = cheap_flight()
    args = {
        "user_id": USER,
        "origin": flight["origin"],
        "destination": flight["destination"],
        "flight_type": "one_way",
        "cabin": "economy",
        "flights": [{"flight_number": flight["flight_number"], "date": flight["date"]}],
        "passengers": [{"first_name": "Chen", "last_name": "Jackson", "dob": "1956-07-07"}],
        "payment_methods": [{"payment_id": GIFT_CARD, "amount": flight["price"]}],
        "total_baggages": 0,
        "nonfree_baggages": 0,
        "insurance": "no",
    }
    before = store.documents(world)
    seen = tools.preview(store, world, "book_reservation", args)
    assert store.documents(world) == before
    by_field = {(c["document"], c.get("field")): c for c in seen["changes"]}
    balance = by_field[(f"users/{USER}", f"payment_methods.{GIFT_CARD}.amount")]
    assert (balance["before"], balance["after"]) == (245, 245 - flight["price"])
    assert by_field[(f"users/{USER}", "reservations")]["added"] == ["HATHAT"]
    created = by_field[("reservations/HATHAT", None)]
    assert created["before"] is None
    assert created["after"]["payment_history"] == args["payment_methods"]
    assert args["flights"] == [{"flight_number": flight["flight_number"], "date": flight["date"]}]


def test_a_refused_write_previews_its_error_and_no_change(store, world):
    seen = tools.preview(store, world, "cancel_reservation", {"reservation_id": "NOPE00"})
    assert seen == {"outcome": "Error: reservation not found", "changes": []}


def test_a_read_has_nothing_to_preview_and_bad_calls_raise(store, world):
    assert tools.preview(store, world, "get_user_details", {"user_id": USER}) == {
        "outcome": None,
        "changes": [],
    }
    with pytest.raises(ValueError, match="unknown airline tool"):
        tools.preview(store, world, "drop_tables", {})
    with pytest.raises(TypeError):
        tools.preview(store, world, "cancel_reservation", {"reservation": "4WQ150"})


def cabin_change() -> tuple[dict[str, Any], str, str, int]:
    """A reservation whose flights all have seats in another cabin and whose user has a credit
    card, from the data files: (reservation, new cabin, card id, price difference)."""
    flights = json.loads((DATA / "flights.json").read_text())
    users = json.loads((DATA / "users.json").read_text())
    reservations = json.loads((DATA / "reservations.json").read_text())
    for reservation in sorted(reservations.values(), key=lambda r: r["reservation_id"]):
        cards = [
            key
            for key, method in sorted(users[reservation["user_id"]]["payment_methods"].items())
            if method["source"] == "credit_card"
        ]
        passengers = len(reservation["passengers"])
        for cabin in ("basic_economy", "economy", "business"):
            if cabin == reservation["cabin"] or not cards:
                continue
            dates = [
                flights[f["flight_number"]]["dates"].get(f["date"], {})
                for f in reservation["flights"]
            ]
            if all(
                d.get("status") == "available" and d["available_seats"][cabin] >= passengers
                for d in dates
            ):
                new = sum(d["prices"][cabin] for d in dates) * passengers
                old = sum(f["price"] for f in reservation["flights"]) * passengers
                if new != old:
                    return reservation, cabin, cards[0], new - old
    raise AssertionError("no reservation can change cabin in the data files")


def test_a_flight_change_preview_shows_the_new_flights_and_the_payment(store, world):
    reservation, cabin, card, difference = cabin_change()
    args = {
        "reservation_id": reservation["reservation_id"],
        "cabin": cabin,
        "flights": [
            {"flight_number": f["flight_number"], "date": f["date"]} for f in reservation["flights"]
        ],
        "payment_id": card,
    }
    before = store.documents(world)
    seen = tools.preview(store, world, "update_reservation_flights", args)
    assert store.documents(world) == before
    document = f"reservations/{reservation['reservation_id']}"
    by_field = {c["field"]: c for c in seen["changes"] if c["document"] == document}
    assert by_field["payment_history"]["added"] == [{"payment_id": card, "amount": difference}]
    assert [f["flight_number"] for f in by_field["flights"]["after"]] == [
        f["flight_number"] for f in reservation["flights"]
    ]
    assert by_field["flights"]["before"] == reservation["flights"]
