# Simulated driver: filled in by tests/fakecuda.
FAKECUDA :=
