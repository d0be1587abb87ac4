"""The error form and the compensations of the τ-bench airline tools (Sierra Research, MIT;
``tau_bench/envs/airline/tools``), whose recorded conversations transcript runs replay.

Those tools refuse a call by returning a string that starts with ``"Error:"`` (``"Error:
payment amount does not add up, total price is 305, but paid 255"``) rather than raising; a
replayed step with such an output is a tool error. The names are those of the data set's
``tools.json``; ``examples/airline`` runs the same tools live.

Each write is compensated by ``revert_write(idempotency_key=<the write's key>)``
(``examples/airline/revert.py``), which puts back what the write changed: τ-bench's own
``cancel_reservation`` keeps a cancelled booking and gives no gift-card balance or certificate
back, so it cannot bring the data back to its state before the booking. A deployment that
runs the airline tools on its workers registers ``revert_write`` with them.
"""

from __future__ import annotations

from runs.tools.compensations import Compensation, declare_compensation
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

# The writes: booking, cancelling, certificates and the three updates.
AIRLINE_WRITES = [
    name for name in AIRLINE_TOOLS if name.startswith(("book_", "cancel_", "send_", "update_"))
]
declare_compensation(
    AIRLINE_WRITES, Compensation("revert_write", {"idempotency_key": "call.idempotency_key"})
)
