"""The planner's simulated world: a view, its jobs, the log and the sink, passed through
the real planner tick by tick; sample specs and hand-built observations."""
