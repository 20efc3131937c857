"""``python -m guaipeca.cli``: the same as the ``guaipeca`` command."""

import sys

from guaipeca.cli.app import main

sys.exit(main())
