"""Support shared by the tests and the benchmarks (never imported by the product).

- ``processes``: one wrapper for the project's child processes, and Celery worker, beat and
  daphne commands;
- ``cluster``: a private ``redis-server`` and a cluster of workers and beat;
- ``database``: database URLs, (re)creating a database, and an empty one of a test's own;
- ``migration_history``: taking an empty database forward through the migrations, with a
  stop at a past schema;
- ``statistics``: percentiles;
- ``factories``: users with roles and runs, built through the services;
- ``faults``: the fault-injection harness, split into workload, injector and invariants.
"""
