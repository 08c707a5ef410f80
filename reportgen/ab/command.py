"""``reportgen ab --base DIR --head DIR``: the entry point around the coordinator, taking an ``AbRequest``.

Check the request (no torch here) -> find the scenario file in each checkout (a name through
that checkout's config, else its ``scenarios/``; a scenario on one side only is reported as new or
removed, exit 0) -> start one worker process per side -> ``coordinate`` -> store both runs as
bundles marked as one A/B pair -> the PR comment (Markdown, or JSON) and the exit code (0 no
change or improvement, 1 regression, 7 still inconclusive after the budget, 3 a side failed to
load or compile).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen.ab import calibration
from reportgen.ab.bundles import store_pair
from reportgen.ab.calibration_report import comment_calibration, render_calibration
from reportgen.ab.coordinator import coordinate
from reportgen.ab.pair import PairResult
from reportgen.ab.process import PairSpawner
from reportgen.ab.report import ab_json, render_ab_markdown, render_scenario_only
from reportgen.ab.settings import AbSettings
from reportgen.ab.worker import scenario_path
from reportgen.devices.allocator import THP_ENABLED_FILE, read_thp_mode
from reportgen.devices.host import git_info
from reportgen.devices.neuron.cores import VISIBLE_CORES_ENV, ab_core_pair
from reportgen.devices.neuron.hardware import NeuronLs, detect
from reportgen.errors import BundleError, ExitCode, ReportgenError, ScenarioError, UsageError

if TYPE_CHECKING:
    from reportgen.store.objects import ObjectStore

THP_ON_REQUEST = ("always", "madvise")
"""Kernel THP modes in which an ``madvise`` gets transparent huge pages."""


@dataclass(frozen=True)
class AbRequest:
    """A ``reportgen ab`` invocation: the two checkouts, the scenario, how to measure, where the result goes.
    ``settings.param_defaults`` holds the working folder's config ``params``."""

    base: Path
    head: Path
    scenario: str
    settings: AbSettings
    output: Path | None
    fmt: str  # "markdown" or "json"
    store: Path
    quiet: bool
    calibrations: bool = True
    """Look the runner's calibration up: in ``store``, or in ``object_store`` when the pair is uploaded to one."""
    object_store: ObjectStore | None = None
    """The object store ``store`` is uploaded to when the command ends (None: ``store`` is the store)."""

    def check(self) -> None:
        """Refuse a request that cannot be measured; each message starts with the request field."""
        check_checkouts(self.base, self.head)
        self.settings.check()
        if self.settings.huge_pages:  # asked for: refused where the kernel gives none (the default just goes without)
            check_huge_pages(read_thp_mode())
        if self.output is not None:
            from reportgen.store.outputs import check_output_path

            check_output_path(self.output, self.store)  # before measuring; the write checks again


def check_checkouts(base: Path, head: Path) -> None:
    """Both checkouts must be folders (checked first: the CLI calls it before it parses the other flags)."""
    for field, value in (("base", base), ("head", head)):
        if not value.is_dir():
            raise UsageError(f"{field} {value}: not a folder; give the checkout to measure", field=field)


def run_ab_command(request: AbRequest) -> int:
    """The whole command; returns the exit code."""
    request.check()
    settings = replace(request.settings, thp_on_request=read_thp_mode() in THP_ON_REQUEST)
    request = replace(request, settings=with_neuron_cores(settings, os.environ))
    roots = {"base": request.base.resolve(), "head": request.head.resolve()}
    present = {side: _scenario_present(root, request.scenario) for side, root in roots.items()}
    if not any(present.values()):
        raise ScenarioError(f"{scenario_path(roots['base'], request.scenario)} and "
                            f"{scenario_path(roots['head'], request.scenario)}: no such scenario file on either side")
    commits = {side: git_info(root) for side, root in roots.items()}
    if not all(present.values()):
        text = render_scenario_only(request.scenario, "new" if present["head"] else "removed", commits, request.fmt)
        _emit(text, request.output, request.store)
        return ExitCode.OK
    result = _measure(request, roots)
    stored = store_pair(result, commits, request.store) if result.rounds else None
    if request.settings.calibrate:
        _emit(render_calibration(result, calibration.from_result(result, request.settings), commits, stored,
                                 request.fmt), request.output, request.store)
    else:
        found = _stored_calibration(request, stored)
        text = (ab_json(result, commits, stored, found) if request.fmt == "json"
                else render_ab_markdown(result, commits, stored,
                                           comment_calibration(found, stored is not None and request.calibrations)))
        _emit(text, request.output, request.store)
    if result.failed_sides:
        print("reportgen: error: " + "; ".join(f"the {s.side} side ({roots[s.side]}) failed in {s.error_stage}: {s.error}"
                                               for s in result.failed_sides), file=sys.stderr)
    if request.settings.calibrate and not result.failed_sides:
        return ExitCode.OK  # an A/A's verdict is a figure of the report, not a gate
    return int(result.exit_code)


def with_neuron_cores(settings: AbSettings, environ: Mapping[str, str],
                      neuron_ls: Callable[[], NeuronLs] = detect) -> AbSettings:
    """On Trainium (``--device neuron``, or ``auto`` where the Neuron tools report devices) each worker gets its own
    NeuronCore; two are needed. Elsewhere the settings are returned unchanged."""
    if settings.device not in ("neuron", "auto"):
        return settings
    ls = neuron_ls()
    if settings.device == "auto" and not ls.device_count and not environ.get(VISIBLE_CORES_ENV):
        return settings  # no Neuron device here: auto measures on CUDA or the CPU
    return replace(settings, neuron_cores=ab_core_pair(environ, ls.cores_total))


def _scenario_present(root: Path, ref: str) -> bool:
    """Whether the checkout has the scenario (through its config, else ``scenarios/``); a broken config counts as
    present, so that side's worker fails to load and the comment names the error."""
    try:
        return scenario_path(root, ref).is_file()
    except ReportgenError:
        return True


def check_huge_pages(mode: str | None) -> None:
    """Refuse --huge-pages where this kernel gives no transparent huge pages on request (``mode``: its THP mode)."""
    if mode in THP_ON_REQUEST:
        return
    where = f"{THP_ENABLED_FILE} says {mode}" if mode else f"no {THP_ENABLED_FILE}"
    raise UsageError(f"huge_pages: this machine gives no transparent huge pages on request ({where}); drop it, or "
                     "set that file to madvise", field="huge_pages")


def _measure(request: AbRequest, roots: dict[str, Path]) -> PairResult:
    settings = calibration.run_settings(request.settings) if request.settings.calibrate else request.settings
    with PairSpawner(settings, os.environ) as spawn:
        return coordinate(spawn, {s: str(r) for s, r in roots.items()}, request.scenario, settings,
                          progress=None if request.quiet else _progress)


def _stored_calibration(request: AbRequest, stored: dict[str, str] | None) -> calibration.StoredCalibration | None:
    """The newest calibration in the store for what this pair measured, with its figures for this pair's gate."""
    if stored is None or not request.calibrations:
        return None
    from reportgen.store.loader import load_run

    base = load_run(request.store / stored["base"])
    objects = request.object_store
    if objects is None:
        return calibration.find_calibration(request.store, base, request.settings)
    try:
        read = functools.partial(objects.read_run_jsons, skip_unreadable=True)  # an unreadable one is no calibration
        return calibration.find_listed_calibration(objects.listed_ids(), read, objects.url, base, request.settings)
    except BundleError as exc:  # the pair is measured and will be uploaded: a failed lookup only loses the line
        print(f"reportgen: warning: the runner's calibration was not looked up: {exc.message}", file=sys.stderr)
        return None


def _progress(message: str) -> None:
    print(f"reportgen ab: {message}", file=sys.stderr, flush=True)


def _emit(text: str, output: Path | None, store: Path) -> None:
    if output is None:
        from reportgen.text.terminal import terminal_safe

        sys.stdout.write(terminal_safe(text, keep_newlines=True))  # names from data never reach the terminal raw
        return
    from reportgen.store.atomic import write_output

    write_output(output, text, store)  # refuses a FIFO, device, folder, the store or a site; writes through a link
