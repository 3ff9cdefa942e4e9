"""``python -m analytics PATH...``: the same as ``joynr-sim check PATH...``."""

import sys

from .app import main

sys.exit(main())
