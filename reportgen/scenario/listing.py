"""``reportgen scenarios``: the scenarios a name can refer to, with their variants and parameters."""

from __future__ import annotations

from reportgen.config import Config
from reportgen.devices.backend import import_torch
from reportgen.errors import ExitCode, ReportgenError
from reportgen.scenario.loader import PARAM_TYPES, SCENARIOS_DIR, Scenario, available_scenarios, load_scenario
from reportgen.text.terminal import printable


def describe_scenario(scenario: Scenario) -> list[str]:
    """Indented lines: the variants (in-place and compiled marked) and the declared parameters."""
    lines = []
    for v in scenario.variants:
        marks = [m for m, on in (("compiled", v.compile), ("in-place", v.inplace)) if on]
        lines.append(f"    variant {v.name}{' (' + ', '.join(marks) + ')' if marks else ''}: {v.description}")
    for p in scenario.params:
        kind = PARAM_TYPES.get(p.type, p.type.__name__)
        lines.append(f"    --param {p.name}={p.default!r} ({kind}){': ' + p.help if p.help else ''}")
    return [printable(line) for line in lines]


def print_scenarios(config: Config) -> int:
    """Load and list every scenario; one that fails to load is listed with its error (exit 3 then)."""
    import_torch()
    found = available_scenarios(config.scenarios)
    failed = False
    for name, path in found.items():
        origin = "built-in" if path.parent == SCENARIOS_DIR else str(path)
        try:
            scenario = load_scenario(str(path), config_sources=config.scenarios, project_root=config.root)
        except ReportgenError as exc:
            print(printable(f"{name} [{origin}]: cannot be loaded: {exc.message}"))
            failed = True
            continue
        shape = ",".join(str(d) for d in scenario.default_shape)
        print(printable(f"{name} [{origin}]: {scenario.description} (shape {shape}, {scenario.default_dtype})"))
        for line in describe_scenario(scenario):
            print(line)
    return ExitCode.BAD_INPUT if failed else ExitCode.OK
