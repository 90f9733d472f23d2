"""Helpers of the e2e tests: the operator they start, a view handle, checkpoints on S3,
and the test's own recomputation of what an index must hold."""
