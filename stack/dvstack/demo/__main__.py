"""`python -m dvstack.demo`: the orders demo (make demo)."""

from dvstack.demo.orders import main

if __name__ == "__main__":
    main()
