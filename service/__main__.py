"""`python -m service`: the command line."""

import sys

from service.cli import main

sys.exit(main())
