"""The functional core: observation in, status and actions out."""
