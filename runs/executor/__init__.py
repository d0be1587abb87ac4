"""The executor: how a run's steps are claimed, called, recorded and moved on.

Each step is a chain of short transactions with the tool called between two of them, never
inside one: ``claim`` (queued → running under a lease, its attempt row, its ledger row opened),
``call`` (the tool, with its timeout, in a tool thread), ``record`` (the outcome, the ledger
settled, a checkpoint, and ``advance``: the run's next step queued, claimed for the same
worker, stopped at its gate, or the run finished). A transaction that claims the next step
leaves what recording that step's outcome reads (``runs.store.step.Ahead``): the recording
transaction then checks it in the database instead of reading it, in the same round trip as
its writes, and reads it only when the check fails. ``outcome`` is what an outcome does to
the step and run (one success path for the executor, a client's report and an operator's
settlement); ``ledger`` alone writes the tool-call ledger; ``entry`` holds the three entry
points the wake-ups call; ``gates`` the executor's side of the gate protocol (``runs.gates``).

Rows the executor reads and writes on every step go through the persistence seam
(``runs.store``: plain SQL, pipelined inside Django's transaction) with the columns each
model declares (``UPDATED_FIELDS``); locks follow ``runs.transitions``.
"""
