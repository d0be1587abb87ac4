"""The persistence seam: the only code that writes SQL for runs' rows.

Everything else in the project reads and writes through the ORM or through the functions
here. Only the step's hot path (claim, record an outcome, advance, a client's report, an
appended step) needs SQL of its own, to cost a few round trips and little Python a step
(``benchmarks/README.md``: throughput, "SQL statements, round trips and commits per step"):

- ``rows``, ``inserts``, ``adapt``, ``pipeline``: plain-SQL reads and inserts of model rows,
  each field adapted as the ORM adapts it, pipelined inside Django's own transaction. An
  import-linter contract (``pyproject.toml``) lets no module outside this package import
  them.
- ``transaction.pipelined_atomic``: Django's ``atomic`` with the audit writer, in a pipeline.
- ``audit``: the audit writer's statements run through ``rows`` (installed at start-up), and
  the reads of chain heads and event ids queued with a transaction's first reads. The SQL over
  audit's tables comes from audit itself (``audit.chain``): nothing here names them.
- ``locks``: lock runs and steps (lock order: ``runs.transitions``).
- ``writes``: write rows back: a run's or step's changed fields, guarded (``save_run``,
  ``save_step``), and the rows the executor inserts or changes without a transition
  (attempts, checkpoints, messages, ledger rows).
- ``step``: the locked reads of a step's transaction in one round trip, and what a claim leaves
  for recording its outcome (``Ahead``).
"""
