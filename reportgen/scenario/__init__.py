"""Scenarios: loading a user's scenario files, listing them, their parameters.

The names below are the public face scenario authors import (``from reportgen.scenario import Scenario, Variant``).
"""

from reportgen.scenario.loader import Param, Scenario, Tolerance, Variant

__all__ = ["Param", "Scenario", "Tolerance", "Variant"]
