"""`dv`, the people-facing CLI: pure modules (rows, progress, rollback, plot_data) and the
typer shell (app)."""
