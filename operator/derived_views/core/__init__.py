"""The functional core: pure functions from an observation and the time to actions.

Nothing here reads a clock, the environment, the network or a file. The
shell (Kopf handlers and adapters) does, once per reconcile:

1. observe: `observed.view_from_object`, `status_from_object`,
   `spark_application_from_object`, plus the sink and Kafka through adapters,
   asking for what `revisions_to_observe` / `index_tables_to_observe` /
   `topics_to_observe` name; build an `observed.Observed`;
2. plan: `plan.plan(spec, observed, now)`;
3. act: carry the actions out in order, stopping at the first failure
   (see `actions`).
"""
