"""`python -m dvstack.demo`: the orders demo (make demo)."""

from dvstack.demo.orders import run_orders_demo

if __name__ == "__main__":
    run_orders_demo()
