"""The log a view is computed from, as the planner reads it: the Kafka connection a view
names, lag and staleness (how far an index is behind), when a pass needs fresh end
offsets (`freshness`), where a revision's history starts and whether it is hydrated
(`history`), partitions added under a revision (`partition_growth`), and how fast a build
replays it and is expected to (`build_rates`)."""
