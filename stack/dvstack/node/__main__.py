"""`python -m dvstack.node`: the node's daemons (up, down, check)."""

from dvstack.node.daemons import main

if __name__ == "__main__":
    main()
