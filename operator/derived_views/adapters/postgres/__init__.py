"""The PostgreSQL sink as the operator sees it: its connections (`pool`, `session`), the
ledger and the indexes (`sink`), the alias switch (`alias`), the job's progress reports and
bad-record counts, and the cutover checks (`checks`)."""
