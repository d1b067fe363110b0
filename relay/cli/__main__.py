"""``python -m relay.cli``: the ``span-relay`` command."""

import sys

from relay.cli import main

sys.exit(main())
