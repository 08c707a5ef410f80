"""``python -m reportgen``."""

from __future__ import annotations

import sys

from reportgen.cli import main

sys.exit(main())
