"""Pure renderers of the Kubernetes objects the operator creates."""
