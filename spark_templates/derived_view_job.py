"""spark-submit entry point of the derived-view replay job; see README.md beside it.

    spark-submit ... derived_view_job.py --config-json '<JSON>'   (or --config-file PATH)

The `dvjob` package next to this file does the work; Python puts this file's
directory first on sys.path, so it imports without --py-files.
"""

import sys

try:
    from dvjob.lean_imports import without_optional_libraries

    with without_optional_libraries(sys.argv[1:]):
        from dvjob.main import main
except ImportError as exc:  # e.g. only this file was fetched from a remote URI
    sys.exit(f"dvjob: error: cannot import the dvjob package ({exc}); keep it beside "
             "derived_view_job.py (local:// in the image) or ship it with --py-files")

if __name__ == "__main__":
    sys.exit(main())
