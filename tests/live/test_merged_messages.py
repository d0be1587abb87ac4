"""Live messages of several committed transactions sent as one per group when the sender is
behind (``audit.live.merged``): nothing lost, nothing reordered, nothing sent to the wrong
group."""

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
