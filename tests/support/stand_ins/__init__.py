"""Stand-ins for the shell's adapters in unit tests: the Kubernetes port, end offsets,
Secrets."""
