"""Support shared by the tests and the benchmarks (never imported by the product).

- ``processes``: one wrapper for the project's child processes, and Celery worker, beat and
  daphne commands;
- ``cluster``: a private ``redis-server`` and a cluster of workers and beat;
- ``database``: database URLs and (re)creating a database;
- ``statistics``: percentiles;
- ``factories``: users with roles and runs, built through the services;
- ``faults``: the fault-injection harness, split into workload, injector and invariants.
"""
