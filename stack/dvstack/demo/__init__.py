"""The demos: `python -m dvstack.demo` (orders replayed, then migrated under live
traffic), `python -m dvstack.demo.cdc` (a database's changes through Debezium), and the
tutorial's sample orders (`sample`)."""
