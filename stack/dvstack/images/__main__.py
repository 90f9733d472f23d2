"""`python -m dvstack.images`: the stack's images (build)."""

from dvstack.images.build import main

if __name__ == "__main__":
    main()
