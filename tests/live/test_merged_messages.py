"""Live messages of several committed transactions sent as one per group when the sender is
behind (``audit.live.merged``): nothing lost, nothing reordered, nothing sent to the wrong
group."""

import threading
import time
from typing import Any

from audit import live
from audit.live import merged


def message(*ids: int) -> dict[str, object]:
    return {"type": "audit.events", "events": [{"id": i} for i in ids]}


def test_each_group_gets_its_events_in_commit_order_once():
    first = [("run.a", message(1, 2)), ("runs.1", message(1, 2))]
    second = [("run.b", message(3)), ("runs.1", message(3))]
    third = [("run.a", message(4, 5)), ("runs.1", message(4, 5)), ("approvals.1", message(5))]
    assert merged([first, second, third]) == [
        ("run.a", message(1, 2, 4, 5)),
        ("runs.1", message(1, 2, 3, 4, 5)),
        ("run.b", message(3)),
        ("approvals.1", message(5)),
    ]


def test_one_transaction_is_sent_as_it_was():
    only = [("run.a", message(7, 8, 9)), ("runs.2", message(7, 8, 9))]
    assert merged([only]) == only


class HeldLayer:
    """A channel layer that records what it is sent and holds its first send until
    ``release`` is set."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[int]]] = []
        self.release = threading.Event()

    async def group_send(self, group: str, message: dict[str, Any]) -> None:
        if not self.sent:
            self.release.wait(5)
        self.sent.append((group, [event["id"] for event in message["events"]]))


def test_transactions_committed_while_the_sender_is_busy_go_in_one_message(monkeypatch):
    layer = HeldLayer()
    monkeypatch.setattr(live, "get_channel_layer", lambda: layer)
    sender = live._Sender()
    sender.submit([("run.a", message(1))])
    while sender._pending:  # the first batch is taken...
        time.sleep(0.001)
    for i in range(2, 21):  # ...and these wait while its send is held
        sender.submit([("run.a", message(i)), ("runs.1", message(i))])
    layer.release.set()
    sender.flush(5)
    assert layer.sent == [
        ("run.a", [1]),
        ("run.a", list(range(2, 21))),
        ("runs.1", list(range(2, 21))),
    ]
