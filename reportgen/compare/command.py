"""``reportgen compare BASE HEAD``: the PR comment (GFM Markdown or JSON) and the CI exit code.

Stages: resolve and load both runs (I/O, here) -> ``diff.compare_runs`` (pure: refusals, per-variant
changes with bootstrap intervals judged in ``variants``, op-table differences from ``ops``) ->
``report.render_markdown`` (Jinja template, shrunk to fit GitHub's comment limit) or ``report.comparison_json``
-> write atomically (``reportgen.store.atomic``) or print.
"""

from __future__ import annotations

import sys
from pathlib import Path

from reportgen.compare.diff import compare_runs
from reportgen.compare.report import comparison_json, render_markdown, terminal_notes
from reportgen.compare.request import CompareRequest, OutputFormat
from reportgen.errors import ExitCode
from reportgen.model.run import Run
from reportgen.store.atomic import write_output
from reportgen.store.loader import load_run, load_store_tolerant, resolve_run_dir
from reportgen.store.outputs import check_output_path
from reportgen.store.withdrawn import read_withdrawn
from reportgen.text.terminal import terminal_safe


def load_side(store: Path, ref: str, scenario: str | None = None, machine: str | None = None) -> Run:
    """The run that ``ref`` (id, folder, latest, latest~N, label, git sha) names."""
    return load_run(resolve_run_dir(store, ref, scenario, machine))


def load_history(store: Path) -> list[Run]:
    """The store's runs a drift estimate may use: every valid, not withdrawn bundle (none when ``store`` is not a
    folder; a corrupt bundle elsewhere in the store does not stop a comparison)."""
    if not store.is_dir():
        return []
    runs, _problems = load_store_tolerant(store)
    withdrawn = read_withdrawn(store)
    return [r for r in runs if r.run_id not in withdrawn]


def run_compare(request: CompareRequest) -> int:
    """Load, compare, render, write; ``ExitCode.REGRESSION`` on a regression when the request asks to fail on one."""
    if request.output is not None:
        check_output_path(request.output, request.store)  # before any work; write_output checks again
    where = (request.scenario, request.machine)
    base, head = load_side(request.store, request.base, *where), load_side(request.store, request.head, *where)
    comparison = compare_runs(base, head, request.threshold_pct, load_history(request.store),
                              request.memory_threshold_pct)
    for line in terminal_notes(comparison):
        print(line, file=sys.stderr)
    text = (comparison_json(comparison, request.site_url) if request.output_format is OutputFormat.JSON
            else render_markdown(comparison, request.site_url))
    if request.output is not None:
        write_output(request.output, text, request.store)
    else:
        sys.stdout.write(terminal_safe(text, keep_newlines=True))
    if request.fail_on_regression and comparison.gate_fails:
        return ExitCode.REGRESSION
    return ExitCode.OK
