"""The Kubernetes API: the operator's calls (`client`: SparkApplications, driver pods,
Secrets and their copies, the view's status and events), the CRDs it applies (`crds`) and
what the CLI reads (`views`)."""
