"""`python -m dvstack.node`: the node's daemons (up, down, check)."""

from dvstack.node.daemons import run_node

if __name__ == "__main__":
    run_node()
