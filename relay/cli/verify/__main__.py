"""``python -m relay.cli.verify URL ...``: verify-stream without the ``span-relay`` command."""

import sys

from relay.cli.verify import main

sys.exit(main())
