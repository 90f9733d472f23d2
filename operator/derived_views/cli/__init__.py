"""`dv`, the people-facing CLI: pure modules (rows, progress, rollback, plot_data, plan), the
manifests it reads, and the typer shell (app)."""
