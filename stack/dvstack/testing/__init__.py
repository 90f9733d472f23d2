"""What tests, benchmarks and demos share: topics, events and SparkApplications
(`replay`), live traffic and readers (`traffic`), waiting on a condition (`waiting`), where
figures go (`results`), the suite's phases (`phases`), Avro orders and a registry client."""
