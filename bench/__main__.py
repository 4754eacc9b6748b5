"""``python -m bench``: run the benchmark; see ``bench.run.main``."""

import sys

from bench.run import main

sys.exit(main())
