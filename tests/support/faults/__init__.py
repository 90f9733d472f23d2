"""The fault suite's scenes (a view under traffic, kills and restarts), its spec edits and
the reliability table it writes."""
