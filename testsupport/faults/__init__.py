"""The fault-injection harness (``harness.run_harness``): a ``workload`` of plan runs, the
faults an ``injector`` makes while they execute, the side effects an independent ``recorder``
sees, and the ``invariants`` that must hold after. ``tools`` are the workload's tools, which
the cluster's workers load."""
