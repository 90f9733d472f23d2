"""The job's guard on the view's SQL, the authority: Spark's own parser and analyzer, every
tree node walked (`tree`), every function on the allowlist (`allowlist`), before the query
runs (`guard`)."""
