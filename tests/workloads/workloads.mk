# Workloads: filled in by tests/workloads.
WORKLOADS :=
