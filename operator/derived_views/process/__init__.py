"""Process-wide things of the operator, beside `main`: its settings read from the
environment (`environment`), its Prometheus metrics, the failpoints a fault test arms, and
malloc tuning (`malloc`: hands freed heap back to the system). Read or set up once per
process; a pass reaches them through `reconcile.deps.Deps`."""
