"""``python -m export_core [--backend KEY ...] [--markdown] [--readme FILE]``: the table of every
registered workaround of the installed backends (see :func:`export_core.registry.main`)."""

import sys

from export_core.registry import main

sys.exit(main())
