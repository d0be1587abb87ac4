"""The τ-bench airline tools that change documents: book, cancel and update a reservation
(its baggages, flights or passengers) and send a certificate.

Each takes the call's documents (``documents.Data``) and the model's arguments, changes the
documents in place (``tools.call`` writes them back and records the output under the call's
idempotency key) and returns τ-bench's output text (Sierra Research, MIT;
``tau_bench/envs/airline/tools``), byte for byte: the same generated ids (``HATHAT``,
``HATHAU``, ``HATHAV`` for bookings, ``certificate_3221322``.. for certificates), arithmetic and
``"Error: ..."`` refusals.
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

from examples.airline.documents import Data


def _price_flight(data: Data, flight: dict[str, Any], cabin: str, seats: int) -> str:
    """Check that ``flight`` (``flight_number``, ``date``) can take ``seats`` passengers in
    ``cabin`` and add its ``price``, ``origin`` and ``destination`` to it, in that key order;
    returns τ-bench's error text, or "" when it can."""
    number = flight["flight_number"]
    if number not in data["flights"]:
        return f"Error: flight {number} not found"
    flight_data = data["flights"][number]
    if flight["date"] not in flight_data["dates"]:
        return f"Error: flight {number} not found on date {flight['date']}"
    on_date = flight_data["dates"][flight["date"]]
    if on_date["status"] != "available":
        return f"Error: flight {number} not available on date {flight['date']}"
    if on_date["available_seats"][cabin] < seats:
        return f"Error: not enough seats on flight {number}"
    flight["price"] = on_date["prices"][cabin]
    flight["origin"] = flight_data["origin"]
    flight["destination"] = flight_data["destination"]
    return ""


def book_reservation(
    data: Data,
    user_id: str,
    origin: str,
    destination: str,
    flight_type: str,
    cabin: str,
    flights: list[dict[str, Any]],
    passengers: list[dict[str, Any]],
    payment_methods: list[dict[str, Any]],
    total_baggages: int,
    nonfree_baggages: int,
    insurance: str,
) -> str:
    reservations, users = data["reservations"], data["users"]
    if user_id not in users:
        return "Error: user not found"
    user = users[user_id]
    # The original assumes at most three bookings per task.
    reservation_id = "HATHAT"
    if reservation_id in reservations:
        reservation_id = "HATHAU"
        if reservation_id in reservations:
            reservation_id = "HATHAV"
    booked_flights: list[dict[str, Any]] = deepcopy(flights)
    reservation: dict[str, Any] = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": booked_flights,
        "passengers": passengers,
        "payment_history": payment_methods,
        "created_at": "2024-05-15T15:00:00",
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
    }
    total_price = 0
    for flight in booked_flights:
        error = _price_flight(data, flight, cabin, len(passengers))
        if error:
            return error
        total_price += flight["price"] * len(passengers)
    if insurance == "yes":
        total_price += 30 * len(passengers)
    total_price += 50 * nonfree_baggages
    for payment in payment_methods:
        payment_id, amount = payment["payment_id"], payment["amount"]
        if payment_id not in user["payment_methods"]:
            return f"Error: payment method {payment_id} not found"
        method = user["payment_methods"][payment_id]
        if method["source"] in ["gift_card", "certificate"] and method["amount"] < amount:
            return f"Error: not enough balance in payment method {payment_id}"
    paid = sum(payment["amount"] for payment in payment_methods)
    if paid != total_price:
        return (
            f"Error: payment amount does not add up, total price is {total_price}, but paid {paid}"
        )
    for payment in payment_methods:
        payment_id, amount = payment["payment_id"], payment["amount"]
        source = user["payment_methods"][payment_id]["source"]
        if source == "gift_card":
            user["payment_methods"][payment_id]["amount"] -= amount
        elif source == "certificate":
            del user["payment_methods"][payment_id]
    reservations[reservation_id] = reservation
    user["reservations"].append(reservation_id)
    return json.dumps(reservation)


def cancel_reservation(data: Data, reservation_id: str) -> str:
    reservations = data["reservations"]
    if reservation_id not in reservations:
        return "Error: reservation not found"
    reservation = reservations[reservation_id]
    refunds = [
        {"payment_id": payment["payment_id"], "amount": -payment["amount"]}
        for payment in reservation["payment_history"]
    ]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    return json.dumps(reservation)


def _payment_method(
    data: Data, reservation: dict[str, Any], payment_id: str, total_price: int
) -> tuple[dict[str, Any] | None, str]:
    methods = data["users"][reservation["user_id"]]["payment_methods"]
    if payment_id not in methods:
        return None, "Error: payment method not found"
    method = methods[payment_id]
    if method["source"] == "certificate":
        return None, "Error: certificate cannot be used to update reservation"
    if method["source"] == "gift_card" and method["amount"] < total_price:
        return None, "Error: gift card balance is not enough"
    return method, ""


def update_reservation_baggages(
    data: Data, reservation_id: str, total_baggages: int, nonfree_baggages: int, payment_id: str
) -> str:
    reservations = data["reservations"]
    if reservation_id not in reservations:
        return "Error: reservation not found"
    reservation = reservations[reservation_id]
    total_price = 50 * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    method, error = _payment_method(data, reservation, payment_id, total_price)
    if method is None:
        return error
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    if method["source"] == "gift_card":
        method["amount"] -= total_price
    if total_price != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": total_price})
    return json.dumps(reservation)


def update_reservation_flights(
    data: Data, reservation_id: str, cabin: str, flights: list[dict[str, Any]], payment_id: str
) -> str:
    reservations = data["reservations"]
    if reservation_id not in reservations:
        return "Error: reservation not found"
    reservation = reservations[reservation_id]
    passengers = len(reservation["passengers"])
    total_price = 0
    flights = deepcopy(flights)
    for flight in flights:
        kept = [
            old
            for old in reservation["flights"]
            if old["flight_number"] == flight["flight_number"]
            and old["date"] == flight["date"]
            and cabin == reservation["cabin"]
        ]
        if kept:
            total_price += kept[0]["price"] * passengers
            flight["price"] = kept[0]["price"]
            flight["origin"] = kept[0]["origin"]
            flight["destination"] = kept[0]["destination"]
            continue
        error = _price_flight(data, flight, cabin, passengers)
        if error:
            return error
        total_price += flight["price"] * passengers
    total_price -= sum(old["price"] for old in reservation["flights"]) * passengers
    method, error = _payment_method(data, reservation, payment_id, total_price)
    if method is None:
        return error
    if method["source"] == "gift_card":
        method["amount"] -= total_price
    reservation["flights"] = flights
    if total_price != 0:
        reservation["payment_history"].append({"payment_id": payment_id, "amount": total_price})
    return json.dumps(reservation)


def update_reservation_passengers(
    data: Data, reservation_id: str, passengers: list[dict[str, Any]]
) -> str:
    reservations = data["reservations"]
    if reservation_id not in reservations:
        return "Error: reservation not found"
    reservation = reservations[reservation_id]
    if len(passengers) != len(reservation["passengers"]):
        return "Error: number of passengers does not match"
    reservation["passengers"] = passengers
    return json.dumps(reservation)


def send_certificate(data: Data, user_id: str, amount: int) -> str:
    users = data["users"]
    if user_id not in users:
        return "Error: user not found"
    user = users[user_id]
    # The original assumes at most three certificates per task.
    for number in (3221322, 3221323, 3221324):
        payment_id = f"certificate_{number}"
        if payment_id not in user["payment_methods"]:
            user["payment_methods"][payment_id] = {
                "source": "certificate",
                "amount": amount,
                "id": payment_id,
            }
            return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
    return ""
