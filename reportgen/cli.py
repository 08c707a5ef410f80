"""The command line: a thin edge over the library. Errors become one line and an exit code here.

argparse stops here: each ``_cmd_*`` turns the Namespace into the library's typed request
(``ProfileRequest``, ``CompareRequest``, ``ImportRequest``, ``PublishRequest``) and calls one
library function. Checks of flag syntax live here and name the flag; the library names fields.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen import __version__, devices
from reportgen.ab.settings import CLOCKS, AbSettings
from reportgen.errors import ConfigError, ExitCode, ReportgenError, ScenarioError, UsageError
from reportgen.text.terminal import terminal_safe

if TYPE_CHECKING:
    from reportgen.config import Config
    from reportgen.profile.command import ProfileRequest
    from reportgen.scenario.loader import Scenario

DEFAULT_SCENARIO = "rmsnorm"
"""What ``reportgen profile`` runs when neither --scenario nor the config names a scenario."""
EXIT_CODES_HELP = """exit codes:
  0  success
  1  compare --fail-on-regression: a variant is significantly slower
  2  bad command-line arguments
  3  bad input: a bundle, trace or site is missing, corrupt or of an unknown version
  4  profile: at least one variant failed or gave a wrong result (the run is still stored)
  5  the requested device or its software (torch, torch_neuronx) is not present
  6  conflict: another reportgen holds the lock, or the run already exists
  7  ab: still inconclusive when the time budget ran out
 70  internal error (a bug: please report it with the traceback from REPORTGEN_DEBUG=1)
130  interrupted (Ctrl-C); stored runs and the site are unchanged
"""


COMPARE_EPILOG = """A change counts when |head/base - 1| >= --threshold AND its 95 % bootstrap interval excludes 0.
Runs of different devices or scenario parameters are refused; differing software versions are warned about.

exit codes:
  0  compared (no significant slowdown, or --fail-on-regression not given)
  1  --fail-on-regression: a variant is significantly slower, or failed/incorrect in HEAD but OK in BASE
  2  bad command-line arguments (--threshold, --site-url); --output is not a regular file, a new path
     or a symlink to one, or cannot be written
  3  a run is missing or corrupt, or the runs cannot be compared (device or scenario parameters differ)
 70  internal error
"""

PUBLISH_EPILOG = """The site must be built and clean: manifest.json and .nojekyll present, every file and run page the
manifest lists present, and no .site-tmp-*/.tmp-* build folder next to it or inside it.

exit codes:
  0  published (or the branch already held this site)
  3  the site is missing, not built or dirty; not a git repository; a git command (e.g. the push) failed
  6  the branch moved while publishing: run it again
"""


def default_store() -> Path:
    """The results store: $REPORTGEN_STORE or ./results."""
    return Path(os.environ.get("REPORTGEN_STORE", "results"))


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser; every command has --help."""
    parser = _Parser(
        prog="reportgen",
        description="Profile operator variants and publish the evidence as a versioned static site.",
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"reportgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for register in (_add_profile, _add_runs, _add_build, _add_compare, _add_publish, _add_import, _add_ab,
                     _add_doctor, _add_rm, _add_scenarios, _add_config, _add_init):
        register(sub)
    return parser


def _config(args: argparse.Namespace, **flags: object) -> Config:
    """The project config (found from the working directory upwards) with these flags over it."""
    from reportgen.config import load_config

    return load_config(flags=flags)


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", type=Path, default=None, help="results store folder (default: $REPORTGEN_STORE or ./results)")


def _add_profile(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="profile a scenario's variants and store one run bundle",
                       description="Profile every variant of a scenario on the best device present "
                       "(neuron > cuda > cpu) and store the result as a run bundle.")
    p.add_argument("--device", choices=["auto", *devices.profile_device_names()], default=None,
                   help="device (default: the config's device, $REPORTGEN_DEVICE, else auto)")
    p.add_argument("--scenario", action="append", default=None,
                   help="scenario name (the config's or built-in) or a path to a .py file; repeat for several "
                   "(default: every scenario the config names, else rmsnorm); one bundle per scenario")
    p.add_argument("--param", action="append", default=None, metavar="NAME=VALUE",
                   help="a scenario parameter (repeatable), e.g. --param eps=1e-5 (see 'reportgen scenarios')")
    p.add_argument("--machine", default=None, help="name of this machine; history and comparisons key on it "
                   "(default: the config's machine or $REPORTGEN_MACHINE)")
    p.add_argument("--baseline", default=None, help="variant the others are compared with (default: the scenario's)")
    p.add_argument("--shape", default=None, help="input shape, comma-separated (default: the scenario's)")
    p.add_argument("--sweep", default=None, metavar="SHAPES",
                   help="also time these shapes, separated by ';' (e.g. '1,4096; 64,4096; 4096,8192'), or "
                   "'default' for the scenario's sweep, 'none' for no sweep (default: the config's sweep); the run "
                   "page gets a per-shape table, a scaling chart and a roofline")
    p.add_argument("--sweep-param", action="append", default=None, metavar="NAME=V1,V2",
                   help="also time these values of a declared scenario parameter (repeatable; every combination, at "
                   "every sweep shape or at the shape), e.g. --sweep-param eps=1e-5,1e-6 (default: the config's)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default: the scenario's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="", help="free text shown in reports (e.g. the change being measured)")
    p.add_argument("--variants", default=None, help="comma-separated subset of variants to run")
    p.add_argument("--samples", type=int, default=None, help="timing samples per variant (default 50)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up calls after the first (default 3)")
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--quiet", action="store_true", help="no progress display")
    _store_arg(p)
    p.set_defaults(func=_cmd_profile)


def _add_runs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("runs", help="list stored runs", description="List the runs in the store, oldest first.")
    p.add_argument("--scenario", default=None, help="only runs of this scenario")
    p.add_argument("--machine", default=None, help="only runs recorded with this machine name")
    p.add_argument("--all", action="store_true", help="include withdrawn runs")
    _store_arg(p)
    p.set_defaults(func=_cmd_runs)


def _add_rm(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("rm", help="withdraw a run from the history (the bundle is kept)",
                       description="Withdraw RUN (an id, latest~N, a label or a git sha): history, latest~N and "
                       "'reportgen runs' skip it; its permanent page says it was withdrawn and why.")
    p.add_argument("run")
    p.add_argument("--reason", required=True, help="why, in one line (shown on the run's page)")
    p.add_argument("--scenario", default=None, help="latest~N counts runs of this scenario (default: the newest's)")
    p.add_argument("--machine", default=None, help="latest~N counts runs of this machine (default: the newest's)")
    _store_arg(p)
    p.set_defaults(func=_cmd_rm)


def _add_scenarios(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scenarios", help="list the scenarios found, with their variants and parameters",
                       description="List the config's scenarios and the built-in ones (loading each: needs torch).")
    p.add_argument("--names", action="store_true",
                   help="only the names 'reportgen profile' runs without --scenario (the config's scenarios, else "
                   "rmsnorm), one per line, without loading them")
    p.set_defaults(func=_cmd_scenarios)


def _add_config(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="print the effective configuration and where each value came from",
                       description="Print the settings from [tool.reportgen] in pyproject.toml or reportgen.toml "
                       "(found from the working directory upwards), environment variables and defaults.")
    p.set_defaults(func=_cmd_config)


def _add_init(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("init", help="write a config, an example scenario and a CI workflow into this repository",
                       description="Write reportgen.toml, bench/example_scenario.py and "
                       ".github/workflows/reportgen.yml; never overwrites a file (exit 6 naming it).")
    p.add_argument("--dir", type=Path, default=Path("."), help="repository folder (default: the current one)")
    p.add_argument("--action-ref", default=None, help="the reportgen action the workflow uses (default: "
                   "<this reportgen's repository>@v<version>)")
    p.set_defaults(func=_cmd_init)


def _add_build(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build the static report site from stored runs",
                       description="Render every stored run into a versioned static site (HTML and Markdown).")
    p.add_argument("--runs", type=Path, default=None, help="results store (default: $REPORTGEN_STORE or ./results)")
    p.add_argument("--out", type=Path, default=None, help="site folder (default: the config's site, else site/)")
    p.add_argument("--base-url", default=None,
                   help="sub-path the site is served under, e.g. /myrepo/ (default: the config's, else /)")
    p.set_defaults(func=_cmd_build)


def _add_compare(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("compare", help="compare two runs as a PR comment (Markdown) with a CI exit code",
                       description="Compare BASE and HEAD (run ids, run folders, latest or latest~N).",
                       epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base")
    p.add_argument("head")
    p.add_argument("--threshold", type=float, default=None,
                   help="smallest change in percent that counts (default: the config's, else 5)")
    p.add_argument("--scenario", default=None, help="latest~N counts runs of this scenario (default: the newest's)")
    p.add_argument("--machine", default=None, help="latest~N counts runs of this machine (default: the newest's)")
    p.add_argument("--fail-on-regression", action="store_true", help="exit 1 when any variant is significantly slower")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--site-url", default=None, help="URL of the published site, to link both runs' pages")
    p.add_argument("--output", type=Path, default=None, help="write to this file instead of stdout")
    _store_arg(p)
    p.set_defaults(func=_cmd_compare)


def _add_publish(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("publish", help="commit the built site to the gh-pages branch",
                       description="Commit the built site to a gh-pages branch, keeping what it already holds.",
                       epilog=PUBLISH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--site", type=Path, default=Path("site"))
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: the current one)")
    p.add_argument("--branch", default="gh-pages")
    p.add_argument("--remote", default="origin")
    p.add_argument("--push", action="store_true", help="push the branch to --remote afterwards")
    p.set_defaults(func=_cmd_publish)


def _add_import(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="import an existing trace or TorchNeuron profile_output/ as a run",
                       description="Turn a Kineto/Chrome trace (.json, .json.gz), a folder of them, or a "
                       "TorchNeuron profile_output/ folder into a run bundle.")
    p.add_argument("path", type=Path)
    p.add_argument("--label", default="")
    p.add_argument("--device", choices=["auto", *devices.device_names()], default="auto")
    _store_arg(p)
    p.set_defaults(func=_cmd_import)


def _add_doctor(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("doctor", help="profile on a device and write a diagnostics bundle to attach to an issue",
                       description="Run 'reportgen profile --device neuron' and collect versions, neuron-ls -j, "
                       "settings, the run bundle and neuron-explorer's raw outputs into --out and --out.tar.gz.")
    p.add_argument("--device", choices=["neuron"], required=True)
    p.add_argument("--out", type=Path, default=Path("reportgen-doctor"), help="new folder (default: reportgen-doctor)")
    p.add_argument("--scenario", default="rmsnorm")
    p.add_argument("--profile-output", type=Path, default=None, help="also inventory an existing profile_output/")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="limit for the profile run (default 3600)")
    p.set_defaults(func=_cmd_doctor)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from reportgen.devices.neuron.doctor import run_doctor

    return run_doctor(args)


def _store(args: argparse.Namespace, attr: str = "store") -> Path:
    return _config(args, store=getattr(args, attr, None)).store


def profile_request(args: argparse.Namespace, store: Path, config: Config | None = None,
                    scenario_ref: str | None = None) -> ProfileRequest:
    """Validate every ``profile`` argument before profiling starts; errors name the flag and the fix."""
    import dataclasses

    from reportgen.config import load_config
    from reportgen.devices import import_torch
    from reportgen.profile.command import ProfileRequest
    from reportgen.profile.measure import MeasureSettingsIn
    from reportgen.scenario.loader import (
        check_input_size,
        check_seed,
        check_threads,
        load_scenario,
        parse_dtype,
        parse_shape,
    )
    from reportgen.store.bundle import check_label, check_store

    import_torch()  # scenario files import torch: say how to install it, not that the scenario failed
    config = config or load_config(flags={"store": store})
    ref = scenario_ref or (args.scenario[0] if isinstance(args.scenario, list) else args.scenario) or "rmsnorm"
    scenario = load_scenario(ref, config_sources=config.scenarios, project_root=config.root)
    params = scenario.resolve_params(getattr(args, "param_values", None) or {}, config.params, flag="--param")
    baseline = config.baseline
    if baseline is not None and baseline not in scenario.variant_names():
        if config.origin("baseline").startswith("flag"):
            raise ScenarioError(f"--baseline {baseline}: scenario {scenario.name!r} has no such variant; "
                                f"choose one of {', '.join(scenario.variant_names())}")
        baseline = None  # a config-wide baseline another scenario has
    if baseline is not None:
        scenario = dataclasses.replace(scenario, baseline=baseline)
    shape = parse_shape(args.shape) if args.shape is not None else scenario.default_shape
    dtype = parse_dtype(args.dtype) if args.dtype else scenario.default_dtype
    if dtype not in scenario.tolerances:
        raise ScenarioError(f"--dtype {dtype}: scenario {scenario.name!r} declares no tolerance for it; "
                            f"use one of {', '.join(sorted(scenario.tolerances))} or add it to the scenario")
    names = scenario.variant_names()
    chosen = tuple(x.strip() for x in args.variants.split(",")) if args.variants else tuple(names)
    unknown = [x for x in chosen if x not in names]
    if unknown or not chosen:
        raise ScenarioError(f"--variants {args.variants!r}: unknown {unknown}; scenario "
                            f"{scenario.name!r} has {', '.join(names)}")
    _check_at_least("--samples", args.samples, minimum=2)
    _check_at_least("--warmup", args.warmup, minimum=0)
    check_threads(args.threads)
    check_seed(args.seed)
    check_input_size(shape, dtype)
    sweep = _sweep_of(getattr(args, "sweep", None), config, scenario, dtype)
    sweep_params = _sweep_params_of(getattr(args, "sweep_param", None), config, scenario, len(sweep) or 1)
    check_label(args.label)
    check_store(store)
    settings = MeasureSettingsIn(samples=args.samples or 50, warmup=3 if args.warmup is None else args.warmup)
    device = config.device if getattr(args, "device", None) is None else args.device
    return ProfileRequest(device, scenario, shape, dtype, args.seed, args.label, chosen, settings,
                          args.threads, store, args.quiet, params, config.machine, sweep, sweep_params)


def _sweep_of(flag: str | None, config: Config, scenario: Scenario, dtype: str = "float32"
              ) -> tuple[tuple[int, ...], ...]:
    """The shapes to sweep: ``--sweep`` (``none`` turns the config's off), else the config's ``sweep``; each
    checked to fit in memory. Errors name where the sweep came from (the flag, or the config file and key).

    A config ``sweep = "default"`` skips scenarios that declare no default sweep (it is set for them all).
    """
    from reportgen.scenario.loader import check_input_size, parse_sweep

    def checked(text: str) -> tuple[tuple[int, ...], ...]:
        shapes = parse_sweep(text, scenario)
        try:
            for shape in shapes:
                check_input_size(shape, dtype)
        except ScenarioError as exc:
            raise ScenarioError(f"sweep {exc.message}", field="sweep") from None
        return shapes

    if flag is not None:
        return () if flag.strip() == "none" else checked(flag)
    if config.sweep is None or (config.sweep.strip() == "default" and not scenario.default_sweep):
        return ()
    try:
        return checked(config.sweep)
    except ScenarioError as exc:
        raise ConfigError(f"{config.origin('sweep')} {exc.message.removeprefix('sweep').lstrip(': ')}") from None


def _sweep_params_of(flags: list[str] | None, config: Config, scenario: Scenario, shapes: int
                     ) -> tuple[tuple[str, tuple[object, ...]], ...]:
    """``--sweep-param`` values (else the config's ``sweep_params`` this scenario declares), at most
    MAX_SWEEP_POINTS points in all with the sweep's ``shapes``."""
    from reportgen.scenario.loader import MAX_SWEEP_POINTS, parse_sweep_params

    if flags:
        swept = parse_sweep_params(flags, scenario)
    else:
        declared = {p.name for p in scenario.params}
        items = [f"{k}={v}" for k, v in config.sweep_params.items() if k in declared]
        try:
            swept = parse_sweep_params(items, scenario)
        except ScenarioError as exc:
            raise ConfigError(f"{config.origin('sweep_params')}: {exc.message}") from None
    points = shapes
    for _name, values in swept:
        points *= len(values)
    if swept and points > MAX_SWEEP_POINTS:
        raise ScenarioError(f"sweep_param: {points} points (shapes × parameter values), more than "
                            f"{MAX_SWEEP_POINTS}; sweep fewer values or split the sweep into several runs",
                            field="sweep_param")
    return swept


def _check_at_least(flag: str, value: int | None, minimum: int) -> None:
    if value is not None and value < minimum:
        raise UsageError(f"{flag} {value}: must be at least {minimum}")


def _cmd_profile(args: argparse.Namespace) -> int:
    from reportgen.config import parse_param_flags
    from reportgen.profile.command import run_profile

    args.param_values = parse_param_flags(args.param)
    config = _config(args, store=args.store, device=args.device, machine=args.machine, baseline=args.baseline,
                     params=args.param_values or None)
    refs = args.scenario or _config_scenario_names(config) or [DEFAULT_SCENARIO]
    requests = [profile_request(args, config.store, config, ref) for ref in refs]  # all checked first
    codes = [run_profile(request) for request in requests]
    return max(codes)


def _config_scenario_names(config: Config) -> list[str]:
    from reportgen.scenario.loader import scenario_files

    return [str(path) for path in scenario_files(config.scenarios).values()]


def _cmd_runs(args: argparse.Namespace) -> int:
    from reportgen.store.runs import RunsRequest, print_runs

    config = _config(args, store=args.store, machine=args.machine)
    return print_runs(RunsRequest(config.store, args.scenario, args.machine, args.all))


def _cmd_rm(args: argparse.Namespace) -> int:
    from reportgen.store.runs import RemoveRequest, remove_command

    return remove_command(RemoveRequest(_store(args), args.run, args.reason, args.scenario, args.machine))


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from reportgen.scenario.listing import print_scenarios

    config = _config(args)
    if args.names:
        from reportgen.config import printable
        from reportgen.scenario.loader import scenario_files

        for name in list(scenario_files(config.scenarios)) or [DEFAULT_SCENARIO]:
            print(printable(name))
        return ExitCode.OK
    return print_scenarios(config)


def _cmd_config(args: argparse.Namespace) -> int:
    from reportgen.config import print_config

    print_config(_config(args))
    return ExitCode.OK


def _cmd_init(args: argparse.Namespace) -> int:
    from reportgen.ci.init import InitRequest, run_init

    return run_init(InitRequest(args.dir, args.action_ref))


def _cmd_build(args: argparse.Namespace) -> int:
    from reportgen.site import build_site

    config = _config(args, store=args.runs, site=args.out, base_url=args.base_url)
    result = build_site(config.store, config.site, config.base_url)
    print(terminal_safe(result.summary(), keep_newlines=True))
    return ExitCode.OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from reportgen.compare.command import CompareRequest, OutputFormat, run_compare, valid_site_url

    if args.threshold is not None and (not math.isfinite(args.threshold) or args.threshold < 0):
        raise UsageError(f"--threshold {args.threshold!r}: must be a finite number of percent >= 0")
    config = _config(args, store=args.store, threshold=args.threshold)
    threshold = config.threshold_pct
    if args.site_url is not None and not valid_site_url(args.site_url):
        raise UsageError(f"--site-url {args.site_url[:60]!r}: expected an http(s) URL such as "
                         "https://user.github.io/repo/")
    return run_compare(CompareRequest(base=args.base, head=args.head, store=config.store,
                                      threshold_pct=threshold, fail_on_regression=args.fail_on_regression,
                                      output_format=OutputFormat(args.format), site_url=args.site_url,
                                      output=args.output, scenario=args.scenario, machine=args.machine))


def _cmd_publish(args: argparse.Namespace) -> int:
    from reportgen.site.publish import PublishRequest, run_publish_command

    return run_publish_command(PublishRequest(site=args.site, repo=args.repo, branch=args.branch,
                                              remote=args.remote, push=args.push))


def _cmd_import(args: argparse.Namespace) -> int:
    from reportgen.store.bundle import check_label
    from reportgen.traces.importer import ImportRequest, run_import_command

    check_label(args.label or "")
    request = ImportRequest(Path(args.path), args.label or "", args.device or "auto")
    return run_import_command(request, _store(args))


AB_EPILOG = """Base and head are measured in one job, on one device, each side in its own worker process that imports its
own checkout's scenario (and the user's package from that tree), in interleaved rounds (ABBA order), in several
sessions: each session is a fresh pair of worker processes (two processes running the same code differ by a fixed
amount for their whole life). Per round and variant: the median of each side's block and the ratio head/base; per
session, the median of its rounds' ratios; a 95 % interval over sessions (Wilcoxon signed-rank, Hodges-Lehmann,
on the logs of the session ratios).
Regression/improvement only when the whole interval lies beyond +/- --threshold; no change when inside; while
inconclusive, more sessions up to --max-seconds. See docs/ab-testing.md.

exit codes:
  0  no change or improvement (also: the scenario exists on one side only: new or removed)
  1  regression: a variant is slower beyond the threshold, or fails to compile or is wrong in head only (named)
  2  bad command-line arguments, or the scenario exists on neither side
  3  a side failed to import its scenario or make its inputs (named in the comment)
  7  still inconclusive when the time budget ran out
 70  internal error
"""


def _add_ab(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ab", help="interleaved A/B profiling of two checkouts: a PR verdict with an exit code",
                       description="Measure BASE and HEAD checkouts in interleaved rounds on this machine and print a "
                       "PR comment.", epilog=AB_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="the base checkout's folder")
    p.add_argument("--head", required=True, help="the head checkout's folder")
    p.add_argument("--scenario", default="rmsnorm",
                   help="a name (each checkout's config scenarios, else its scenarios/) or a .py path relative to it")
    p.add_argument("--threshold", type=float, default=None,
                   help="smallest change in percent that counts (default: the config's, else 5)")
    d = AbSettings()
    p.add_argument("--sessions", type=int, default=d.min_sessions,
                   help=f"sessions (fresh pairs of worker processes) before the first verdict (>= 6; default {d.min_sessions})")
    p.add_argument("--rounds", type=int, default=d.rounds_per_session,
                   help=f"rounds per session (even, >= 2; default {d.rounds_per_session})")
    p.add_argument("--max-seconds", type=float, default=d.max_seconds,
                   help="time budget for the whole measurement: loading, compiling and rounds of every session "
                   f"(default {d.max_seconds:g})")
    p.add_argument("--samples", type=int, default=d.samples_per_block,
                   help=f"samples per variant per side per round (default {d.samples_per_block})")
    p.add_argument("--shape", default=None, help="input shape, comma-separated (default: the base scenario's)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default: the base scenario's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variants", default=None, help="comma-separated subset of variants")
    p.add_argument("--param", action="append", default=None, metavar="NAME=VALUE",
                   help="a scenario parameter in both workers (repeatable), e.g. --param eps=1e-5 (default: the "
                   "config's params, else the scenario's own defaults)")
    p.add_argument("--device", choices=["auto", "neuron", "cuda", "cpu"], default=None,
                   help="default: the config's, else auto")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads in both workers (default: torch's), e.g. to match production")
    p.add_argument("--clock", choices=CLOCKS, default=d.clock,
                   help="what times a sample: the wall clock (default), or each worker's CPU time (CPU device only; "
                   "not slowed by other processes taking the core)")
    p.add_argument("--huge-pages", action="store_true",
                   help="CPU: both workers' torch allocator takes transparent huge pages for large tensors "
                   "(THP_MEM_ALLOC_ENABLE=1): far fewer page faults per call; see docs/ab-testing.md")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--output", type=Path, default=None, help="write to this file instead of stdout")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    _store_arg(p)
    p.set_defaults(func=_cmd_ab)


def _cmd_ab(args: argparse.Namespace) -> int:
    from reportgen.ab.command import run_ab_command

    config = _config(args, store=args.store)  # the working folder's: the store and the defaults below
    if args.threshold is None:
        args.threshold = config.threshold_pct
    if args.device is None:
        args.device = config.device
    return run_ab_command(args, config.store, config.params)

def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, dispatch, and turn every ReportgenError into one line on stderr."""
    try:
        args = build_parser().parse_args(argv)
        func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
        if func is None:
            build_parser().print_help()
            return ExitCode.USAGE
        return int(func(args))
    except ReportgenError as exc:
        print(f"reportgen: error: {terminal_safe(exc.as_flag_message())}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("reportgen: interrupted; stored runs and the site are unchanged", file=sys.stderr)
        return 130
    except Exception:
        if os.environ.get("REPORTGEN_DEBUG"):
            raise
        import traceback

        last = traceback.format_exc().strip().splitlines()[-1]
        print(f"reportgen: internal error: {terminal_safe(last)} (set REPORTGEN_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return ExitCode.INTERNAL
