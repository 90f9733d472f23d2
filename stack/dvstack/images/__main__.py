"""`python -m dvstack.images`: the stack's images (build)."""

from dvstack.images.build import run_builder

if __name__ == "__main__":
    run_builder()
