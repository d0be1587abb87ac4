"""The τ-bench airline tools that change nothing: user and reservation details, the airports,
direct and one-stop flight search, the calculator, ``think`` and the transfer to a human agent.

Each takes the call's documents (``documents.Data``) and the model's arguments, and returns
τ-bench's output text (Sierra Research, MIT; ``tau_bench/envs/airline/tools``), byte for byte,
refusals included as ``"Error: ..."`` text.
"""

from __future__ import annotations

import json
from typing import Any

from simpleeval import simple_eval

from examples.airline.documents import Data

AIRPORTS = {
    "SFO": "San Francisco",
    "JFK": "New York",
    "LAX": "Los Angeles",
    "ORD": "Chicago",
    "DFW": "Dallas",
    "DEN": "Denver",
    "SEA": "Seattle",
    "ATL": "Atlanta",
    "MIA": "Miami",
    "BOS": "Boston",
    "PHX": "Phoenix",
    "IAH": "Houston",
    "LAS": "Las Vegas",
    "MCO": "Orlando",
    "EWR": "Newark",
    "CLT": "Charlotte",
    "MSP": "Minneapolis",
    "DTW": "Detroit",
    "PHL": "Philadelphia",
    "LGA": "LaGuardia",
}


def _flights(data: Data) -> list[Any]:
    # Sorted by flight number, the data file's order: search results follow it.
    return list(data["flights"].values())


def get_user_details(data: Data, user_id: str) -> str:
    users = data["users"]
    if user_id in users:
        return json.dumps(users[user_id])
    return "Error: user not found"


def get_reservation_details(data: Data, reservation_id: str) -> str:
    reservations = data["reservations"]
    if reservation_id in reservations:
        return json.dumps(reservations[reservation_id])
    # Sic: the original environment answers this for a missing reservation.
    return "Error: user not found"


def list_all_airports(data: Data) -> str:
    return json.dumps(AIRPORTS)


def calculate(data: Data, expression: str) -> str:
    if not all(char in "0123456789+-*/(). " for char in expression):
        return "Error: invalid characters in expression"
    try:
        return str(round(float(simple_eval(expression)), 2))
    except Exception as exc:
        return f"Error: {exc}"


def think(data: Data, thought: str) -> str:
    return ""


def transfer_to_human_agents(data: Data, summary: str) -> str:
    return "Transfer successful"


def _flight_result(flight: dict[str, Any], date: str) -> dict[str, Any]:
    found = {k: v for k, v in flight.items() if k != "dates"}
    found.update(flight["dates"][date])
    return found


def search_direct_flight(data: Data, origin: str, destination: str, date: str) -> str:
    results = []
    for flight in _flights(data):
        if (
            flight["origin"] == origin
            and flight["destination"] == destination
            and date in flight["dates"]
            and flight["dates"][date]["status"] == "available"
        ):
            results.append(_flight_result(flight, date))
    return json.dumps(results)


def search_onestop_flight(data: Data, origin: str, destination: str, date: str) -> str:
    flights = _flights(data)
    results = []
    for first in flights:
        if first["origin"] != origin:
            continue
        for second in flights:
            if second["destination"] != destination or first["destination"] != second["origin"]:
                continue
            # Sic: the original builds the next day's date this way (May 2024 only).
            date2 = (
                f"2024-05-{int(date[-2:]) + 1}"
                if "+1" in first["scheduled_arrival_time_est"]
                else date
            )
            if first["scheduled_arrival_time_est"] > second["scheduled_departure_time_est"]:
                continue
            if (
                date in first["dates"]
                and date2 in second["dates"]
                and first["dates"][date]["status"] == "available"
                and second["dates"][date2]["status"] == "available"
            ):
                leg1 = _flight_result(first, date)
                leg1["date"] = date
                # Sic: the second leg shows the first leg's date's figures.
                leg2 = {k: v for k, v in second.items() if k != "dates"}
                leg2.update(second["dates"][date])
                leg2["date"] = date2
                results.append([leg1, leg2])
    return json.dumps(results)
