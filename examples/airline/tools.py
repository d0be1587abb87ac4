"""The 14 τ-bench airline tools, live on a world of the PostgreSQL store (``store``).

Their behaviour and outputs follow the τ-bench airline environment (Sierra Research, MIT;
``tau_bench/envs/airline/tools``), so a replayed conversation gets the recorded outputs byte
for byte: the same JSON key order, error strings, generated ids (``HATHAT``, ``HATHAU``,
``HATHAV`` for bookings, ``certificate_3221322``.. for certificates) and arithmetic.

``call`` runs one tool in one transaction that locks every document it reads. A write records
its output under its idempotency key in the same transaction, and a call whose key is already
recorded returns that output without acting again: a client killed after the write and before
reporting it gets the same output when it runs the call again.

``preview`` is the writes' dry run, for a reviewer deciding whether a write may happen: what it
would change (balances, payments, flights, a new reservation), computed by the tool itself on
the world's documents in a read-only transaction that is rolled back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, MutableMapping
from copy import deepcopy
from pathlib import Path
from typing import Any

from psycopg import Connection, sql
from simpleeval import simple_eval

from examples.airline.store import DEFAULT_DATA_DIR, Store, recorded_output

WRITE_TOOLS = frozenset(
    {
        "book_reservation",
        "cancel_reservation",
        "send_certificate",
        "update_reservation_baggages",
        "update_reservation_flights",
        "update_reservation_passengers",
    }
)
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


def is_error(output: Any) -> bool:
    """Whether ``output`` is a tool's error answer: τ-bench's tools refuse a call with a
    string that starts with ``"Error:"`` (agentops marks such a step a tool error)."""
    return isinstance(output, str) and output.startswith("Error:")


def tool_specs(data_dir: Path = DEFAULT_DATA_DIR) -> list[dict[str, Any]]:
    """The tools as OpenAI function specs (``tools.json`` of the data directory)."""
    specs: list[dict[str, Any]] = json.loads((data_dir / "tools.json").read_text())
    return specs


class Table(MutableMapping[str, Any]):
    """The documents of one kind in one world, read on demand (locked ``FOR UPDATE`` when
    the call writes); documents read or added are written back by ``flush``."""

    def __init__(self, conn: Connection[Any], world: str, kind: str, lock: bool) -> None:
        self.conn, self.world, self.kind, self.lock = conn, world, kind, lock
        self.loaded: dict[str, Any] = {}
        self.original: dict[str, str | None] = {}
        self.complete = False

    def _select(self, key: str | None) -> list[tuple[str, str]]:
        # One document (``key``) or all of this kind, in key order; locked when writing.
        query = sql.SQL(
            "SELECT key, doc FROM airline_doc WHERE world = %s AND kind = %s {} ORDER BY key {}"
        ).format(
            sql.SQL("AND key = %s" if key is not None else ""),
            sql.SQL("FOR UPDATE" if self.lock else ""),
        )
        params = [self.world, self.kind] + ([key] if key is not None else [])
        return [(str(k), str(d)) for k, d in self.conn.execute(query, params)]

    def _load(self, key: str) -> None:
        if key in self.original or self.complete:
            return
        rows = self._select(key)
        self.original[key] = rows[0][1] if rows else None
        if rows:
            self.loaded[key] = json.loads(rows[0][1])

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        self._load(key)
        return key in self.loaded

    def __getitem__(self, key: str) -> Any:
        if key not in self:
            raise KeyError(key)
        return self.loaded[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._load(key)
        self.loaded[key] = value

    def __delitem__(self, key: str) -> None:
        raise NotImplementedError("the airline tools never delete documents")

    def _all(self) -> dict[str, Any]:
        if not self.complete:
            # In the data files' order: search results list flights in that order.
            for key, doc in self._select(None):
                if key not in self.original:
                    self.original[key] = doc
                    self.loaded[key] = json.loads(doc)
            self.complete = True
        return self.loaded

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())

    def flush(self) -> dict[str, list[str | None]]:
        """Write back every document that changed or was added; returns each one's
        ``[before, after]`` text by key (before: None for a document added)."""
        changed: dict[str, list[str | None]] = {}
        for key, doc in self.loaded.items():
            text = json.dumps(doc)
            if self.original.get(key) == text:
                continue
            changed[key] = [self.original.get(key), text]
            self.conn.execute(
                "INSERT INTO airline_doc (world, kind, key, doc) VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (world, kind, key) DO UPDATE SET doc = EXCLUDED.doc",
                [self.world, self.kind, key, text],
            )
        return changed


class Data(dict[str, Table]):
    """The three tables of one world for one call."""

    def flush(self) -> dict[str, dict[str, list[str | None]]]:
        """Write back every table; returns the documents that changed (``Table.flush``) by
        kind."""
        return {kind: changed for kind, table in self.items() if (changed := table.flush())}


def _flights(data: Data) -> list[Any]:
    # Sorted by flight number, the data file's order: search results follow it.
    return list(data["flights"].values())


# --- the tools: (data, **args) -> output text ------------------------------------------------


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


TOOLS: dict[str, Callable[..., str]] = {
    fn.__name__: fn
    for fn in (
        book_reservation,
        calculate,
        cancel_reservation,
        get_reservation_details,
        get_user_details,
        list_all_airports,
        search_direct_flight,
        search_onestop_flight,
        send_certificate,
        think,
        transfer_to_human_agents,
        update_reservation_baggages,
        update_reservation_flights,
        update_reservation_passengers,
    )
}


def _differences(before: Any, after: Any, path: str) -> list[dict[str, Any]]:
    """What differs from ``before`` to ``after`` (JSON documents), field by field: objects are
    compared key by key, a list that only grew reports the ``added`` items."""
    if before == after:
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        found: list[dict[str, Any]] = []
        for key in [*before, *(k for k in after if k not in before)]:
            where = f"{path}.{key}" if path else key
            found += _differences(before.get(key), after.get(key), where)
        return found
    if isinstance(before, list) and isinstance(after, list) and after[: len(before)] == before:
        return [{"field": path, "added": after[len(before) :]}]
    return [{"field": path, "before": before, "after": after}]


def preview(store: Store, world: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What the write ``name`` with ``args`` would change in ``world``, without changing it.

    The tool runs as ``call`` runs it, on the documents it reads, but in a READ ONLY
    transaction that is always rolled back: nothing is written back and no effect is
    recorded under any idempotency key. Returns ``{"outcome": the tool's output text (an
    "Error: ..." when the call would be refused), "changes": [{"document": "users/<id>",
    "field": "payment_methods.<id>.amount", "before": 245, "after": 45}, or with "added":
    [items appended to a list], ...]}``; a document the call would create has ``before``
    None. A tool that writes nothing gives ``{"outcome": None, "changes": []}`` without
    running.

    Raises:
        ValueError: unknown tool.
        TypeError: arguments that do not fit the tool (missing or unknown keys).
    """
    fn = TOOLS.get(name)
    if fn is None:
        raise ValueError(f"unknown airline tool {name!r}")
    if name not in WRITE_TOOLS:
        return {"outcome": None, "changes": []}
    with store.pool.connection() as conn, conn.transaction(force_rollback=True):
        conn.execute("SET TRANSACTION READ ONLY")
        data = Data(
            {
                kind: Table(conn, world, kind, lock=False)
                for kind in ("users", "flights", "reservations")
            }
        )
        output = fn(data, **deepcopy(args))
        changes: list[dict[str, Any]] = []
        for kind, table in data.items():
            for key, doc in table.loaded.items():
                original = table.original.get(key)
                old = json.loads(original) if original is not None else None
                if old is None:
                    changes.append({"document": f"{kind}/{key}", "before": None, "after": doc})
                    continue
                changes += [
                    {"document": f"{kind}/{key}", **change} for change in _differences(old, doc, "")
                ]
    return {"outcome": output, "changes": changes}


def call(store: Store, world: str, name: str, args: dict[str, Any], *, idempotency_key: str) -> str:
    """Run the tool ``name`` with ``args`` on ``world`` in one transaction; returns its output
    text (τ-bench's, errors included as ``"Error: ..."`` text, as the model saw them).

    A write whose ``idempotency_key`` is already recorded in the world returns the recorded
    output and changes nothing; its record keeps each document it changed before and after
    (``examples.airline.revert`` undoes it).

    Raises:
        ValueError: unknown tool.
        TypeError: arguments that do not fit the tool (missing or unknown keys).
    """
    fn = TOOLS.get(name)
    if fn is None:
        raise ValueError(f"unknown airline tool {name!r}")
    writes = name in WRITE_TOOLS
    with store.pool.connection() as conn, conn.transaction():
        if writes:
            # One write at a time per key: a second call with the key waits, then finds it.
            done = recorded_output(conn, world, idempotency_key)
            if done is not None:
                return done
        data = Data(
            {
                kind: Table(conn, world, kind, lock=writes)
                for kind in ("users", "flights", "reservations")
            }
        )
        output = fn(data, **args)
        if writes:
            changes = data.flush()
            conn.execute(
                "INSERT INTO airline_effect (world, idempotency_key, tool, output, changes) "
                "VALUES (%s, %s, %s, %s, %s)",
                [world, idempotency_key, name, output, json.dumps(changes)],
            )
        return output
