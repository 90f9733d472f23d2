"""`python -m dvstack sample-orders`: order events and the Secrets a view needs, for the tutorial.

A new user has no producer of their own yet; this gives them a topic with
deterministic order events on the local Kafka and, in the view's namespace,
the `views-db` Secret a DerivedView references for the local PostgreSQL and
the `dv-checkpoints` Secret (the local S3 store's credentials) the operator
hands to the view's jobs for their s3a:// checkpoints (DV_CHECKPOINT_SECRET).
Running it again appends more events (a live log), it never recreates the topic.
"""

from __future__ import annotations

import argparse
from typing import Any

from confluent_kafka.admin import AdminClient
from kubernetes import client, config

from dvstack.testing import replay


def _topic_exists(bootstrap: str, topic: str) -> bool:
    metadata = AdminClient({"bootstrap.servers": bootstrap, **replay.QUIET}).list_topics(timeout=30)
    return topic in metadata.topics


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--namespace", default="default",
                        help="namespace of the view; the sink Secret is created there")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=7,
                        help="a different seed gives different order ids (for appending)")
    parser.add_argument("--secret", default="views-db", help="name of the sink Secret")
    parser.add_argument("--checkpoint-secret", default=replay.CHECKPOINT_SECRET,
                        help="name of the checkpoint Secret (the operator's DV_CHECKPOINT_SECRET)")


def run_sample(info: dict[str, Any], args: argparse.Namespace) -> None:
    bootstrap = info["kafka_bootstrap"]
    if args.events < 0 or args.partitions < 1:
        raise SystemExit("--events must be >= 0 and --partitions >= 1")
    if not _topic_exists(bootstrap, args.topic):
        replay.create_topic(bootstrap, args.topic, args.partitions)
        print(f"created topic {args.topic} ({args.partitions} partitions) on {bootstrap}")
    replay.produce(bootstrap, args.topic, replay.make_orders(args.events, seed=args.seed))
    ends = replay.topic_end_offsets(bootstrap, args.topic)
    print(f"produced {args.events:,} order events; end offsets now "
          + ", ".join(f"p{p}={o}" for p, o in sorted(ends.items())))
    core = client.CoreV1Api(config.new_client_from_config(config_file=info["kubeconfig"]))
    replay.ensure_namespace_and_sink_secret(core, args.namespace, args.secret, info["pg"])
    print(f"secret {args.namespace}/{args.secret} holds the local PostgreSQL's connection")
    replay.ensure_checkpoint_secret(core, args.namespace, info["s3"], args.checkpoint_secret)
    print(f"secret {args.namespace}/{args.checkpoint_secret} holds the local S3 store's "
          f"credentials (checkpoints: s3a://{info['s3']['bucket']}/..., "
          f"endpoint {info['s3']['endpoint']})")
    print(f"value schema: {replay.ORDER_SCHEMA}")
