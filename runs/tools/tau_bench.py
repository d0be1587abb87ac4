"""The error form of the τ-bench airline tools (Sierra Research, MIT;
``tau_bench/envs/airline/tools``), whose recorded conversations transcript runs replay.

Those tools refuse a call by returning a string that starts with ``"Error:"`` (``"Error:
payment amount does not add up, total price is 305, but paid 255"``) rather than raising; a
replayed step with such an output is a tool error. The names are those of the data set's
``tools.json``; ``examples/airline`` runs the same tools live.
"""

from __future__ import annotations

from runs.tools.registry import ErrorPrefix, declare_error_form

AIRLINE_TOOLS = (
    "book_reservation",
    "calculate",
    "cancel_reservation",
    "get_reservation_details",
    "get_user_details",
    "list_all_airports",
    "search_direct_flight",
    "search_onestop_flight",
    "send_certificate",
    "think",
    "transfer_to_human_agents",
    "update_reservation_baggages",
    "update_reservation_flights",
    "update_reservation_passengers",
)
AIRLINE_ERROR = ErrorPrefix("Error:")

declare_error_form(AIRLINE_TOOLS, AIRLINE_ERROR)
