"""``python -m tensorlang.cli ARGS``: the same as the ``tensorlang`` command."""
import sys

from .main import main

sys.exit(main())
