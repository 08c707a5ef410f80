"""Each command's handler: turn the parsed flags into the library's typed request and call one library function.

``cli.py`` parses (and is the only other module with argparse); ``COMMANDS`` here maps each command to its
``_cmd_*``, which builds the request (``ProfileRequest``, ``CompareRequest``, ``ImportRequest``,
``PublishRequest``, ``AbRequest``, ``DoctorRequest``, ...). Checks of flag syntax live here and name the flag;
the library names fields.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reportgen.errors import ConfigError, ExitCode, ScenarioError, UsageError, writing_into
from reportgen.store.location import STORE_HELP
from reportgen.store.session import (
    building_store,
    object_store,
    reading_store,
    withdrawal_recorder,
    writing_store,
)
from reportgen.text.terminal import terminal_safe

if TYPE_CHECKING:
    from reportgen.ab.command import AbRequest
    from reportgen.config import Config
    from reportgen.profile.command import ProfileRequest
    from reportgen.scenario.loader import Scenario

DEFAULT_SCENARIO = "rmsnorm"
"""What ``reportgen profile`` runs when neither --scenario nor the config names a scenario."""


def _config(**flags: object) -> Config:
    """The project config (found from the working directory upwards) with these flags over it."""
    from reportgen.config import load_config

    return load_config(flags=flags)


def _cmd_doctor(args: argparse.Namespace) -> int:
    from reportgen.devices.neuron.doctor import DoctorRequest, run_doctor
    from reportgen.store.outputs import check_output_path

    check_output_path(args.out, _config().store, field="out")  # never inside the store, a bundle or a site
    with writing_into(args.out):
        return run_doctor(DoctorRequest(args.out, args.scenario, args.profile_output, args.timeout_s))


def profile_request(args: argparse.Namespace, store: Path, config: Config | None = None,
                    scenario_ref: str | None = None, param_values: Mapping[str, str] | None = None
                    ) -> ProfileRequest:
    """Validate every ``profile`` argument before profiling starts; errors name the flag and the fix.
    ``param_values``: the ``--param`` flags, parsed."""
    from reportgen.config import load_config
    from reportgen.devices import import_torch
    from reportgen.profile.command import ProfileRequest
    from reportgen.profile.measure import MAX_SAMPLES, MAX_WARMUP, MeasureSettingsIn
    from reportgen.scenario.loader import check_input_size, check_seed, check_threads, load_scenario, parse_dtype, parse_shape
    from reportgen.store.layout import check_label
    from reportgen.store.writer import check_store

    import_torch()  # scenario files import torch: say how to install it, not that the scenario failed
    config = config or load_config(flags={"store": store})
    ref = scenario_ref if scenario_ref is not None else (
        args.scenario[0] if isinstance(args.scenario, list) else args.scenario)
    ref = DEFAULT_SCENARIO if ref is None else ref
    scenario = load_scenario(ref, config_sources=config.scenarios, project_root=config.root)
    params = scenario.resolve_params(param_values or {}, config.params, flag="--param")
    scenario = _with_baseline(scenario, config)
    shape = parse_shape(args.shape) if args.shape is not None else scenario.default_shape
    dtype = parse_dtype(args.dtype) if args.dtype is not None else scenario.default_dtype  # '' is refused
    if dtype not in scenario.tolerances:
        raise ScenarioError(f"--dtype {dtype}: scenario {scenario.name!r} declares no tolerance for it; "
                            f"use one of {', '.join(sorted(scenario.tolerances))} or add it to the scenario")
    chosen = _chosen_variants(args.variants, scenario)
    _check_count("--samples", args.samples, minimum=2, maximum=MAX_SAMPLES)
    _check_count("--warmup", args.warmup, minimum=0, maximum=MAX_WARMUP)
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


def _with_baseline(scenario: Scenario, config: Config) -> Scenario:
    """The scenario with the config's (or ``--baseline``'s) baseline, where the scenario has that variant."""
    import dataclasses

    baseline = config.baseline
    if baseline is not None and baseline not in scenario.variant_names():
        if config.origin("baseline").startswith("flag"):
            raise ScenarioError(f"--baseline {baseline}: scenario {scenario.name!r} has no such variant; "
                                f"choose one of {', '.join(scenario.variant_names())}")
        baseline = None  # a config-wide baseline another scenario has
    return scenario if baseline is None else dataclasses.replace(scenario, baseline=baseline)


def _chosen_variants(flag: str | None, scenario: Scenario) -> tuple[str, ...]:
    """``--variants`` (comma-separated), each one the scenario's; else every variant."""
    names = scenario.variant_names()
    chosen = tuple(x.strip(" ") for x in flag.split(",")) if flag is not None else tuple(names)  # a newline stays
    twice = next((x for i, x in enumerate(chosen) if x in chosen[:i]), None)
    if twice is not None:
        raise UsageError(f"--variants {(flag or '')[:80]!r}: {twice[:60]!r} is named twice; name each variant once")
    unknown = [x for x in chosen if x not in names]
    if unknown or not chosen:
        raise ScenarioError(f"--variants {flag!r}: unknown {unknown}; scenario "
                            f"{scenario.name!r} has {', '.join(names)}")
    return chosen


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


def _check_count(flag: str, value: int | None, minimum: int, maximum: int) -> None:
    if value is not None and value < minimum:
        raise UsageError(f"{flag} {value}: must be at least {minimum}")
    if value is not None and value > maximum:
        raise UsageError(f"{flag} {value}: must be at most {maximum:,}")


def _cmd_profile(args: argparse.Namespace) -> int:
    from reportgen.config import parse_param_flags
    from reportgen.profile.command import run_profile

    param_values = parse_param_flags(args.param)
    config = _config(store=args.store, device=args.device, machine=args.machine, baseline=args.baseline,
                     params=param_values or None)
    refs = args.scenario or _config_scenario_names(config) or [DEFAULT_SCENARIO]
    with writing_store(config) as store:  # an object store's runs are uploaded when all are profiled
        requests = [profile_request(args, store, config, ref, param_values) for ref in refs]  # all checked first
        codes = [run_profile(request) for request in requests]
    return max(codes)


def _config_scenario_names(config: Config) -> list[str]:
    from reportgen.scenario.loader import scenario_files

    return [str(path) for path in scenario_files(config.scenarios).values()]


def _cmd_runs(args: argparse.Namespace) -> int:
    from reportgen.catalog.listing import print_runs
    from reportgen.store.runs import RunsRequest

    config = _config(store=args.store, machine=args.machine)
    with reading_store(config) as store:
        return print_runs(RunsRequest(store, args.scenario, args.machine, args.all, config.store_url))


def _cmd_rm(args: argparse.Namespace) -> int:
    from reportgen.store.runs import RemoveRequest, remove_command

    config = _config(store=args.store)
    with reading_store(config) as store, writing_into(store):
        return remove_command(RemoveRequest(store, args.run, args.reason, args.scenario, args.machine),
                              withdrawal_recorder(config))


def _cmd_scenarios(args: argparse.Namespace) -> int:
    from reportgen.scenario.listing import print_scenarios

    config = _config()
    if args.names:
        from reportgen.scenario.loader import scenario_files
        from reportgen.text.terminal import printable

        for name in list(scenario_files(config.scenarios)) or [DEFAULT_SCENARIO]:
            print(printable(name))
        return ExitCode.OK
    return print_scenarios(config)


def _cmd_config(args: argparse.Namespace) -> int:
    from reportgen.config import print_config

    print_config(_config())
    return ExitCode.OK


def _cmd_machine(args: argparse.Namespace) -> int:
    import json

    from reportgen.devices import machine
    from reportgen.model.run import DeviceKind

    device = machine.auto_device() if args.device == "auto" else DeviceKind(args.device)
    report = machine.describe(device)
    if args.json:
        print(json.dumps(report.as_json(), indent=2, ensure_ascii=True))
    else:
        for line in machine.report_lines(report):
            print(terminal_safe(line))
    return ExitCode.OK


def _cmd_init(args: argparse.Namespace) -> int:
    from reportgen.ci.init import InitRequest, run_init

    with writing_into(args.dir):
        return run_init(InitRequest(args.dir, args.action_ref))


def _cmd_build(args: argparse.Namespace) -> int:
    from reportgen.site import build_site

    config = _config(store=args.runs, site=args.out, base_url=args.base_url)
    with building_store(config) as (store, fetch), writing_into(config.site):
        result = build_site(store, config.site, config.base_url, strict=args.strict, keep_traces=args.keep_traces,
                            verify=args.verify, fetch=fetch)
    print(terminal_safe(result.summary(), keep_newlines=True))
    return ExitCode.OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from reportgen.compare.command import run_compare
    from reportgen.compare.report import valid_site_url
    from reportgen.compare.request import CompareRequest, OutputFormat

    if args.threshold is not None and (not math.isfinite(args.threshold) or args.threshold < 0):
        raise UsageError(f"--threshold {args.threshold!r}: must be a finite number of percent >= 0")
    config = _config(store=args.store, threshold=args.threshold)
    threshold = config.threshold_pct
    _check_memory_threshold(args.memory_threshold)
    if args.site_url is not None and not valid_site_url(args.site_url):
        raise UsageError(f"--site-url {args.site_url[:60]!r}: expected an http(s) URL such as "
                         "https://user.github.io/repo/")
    with reading_store(config) as store:
        return run_compare(CompareRequest(base=args.base, head=args.head, store=store,
                                          threshold_pct=threshold, fail_on_regression=args.fail_on_regression,
                                          output_format=OutputFormat(args.format), site_url=args.site_url,
                                          output=args.output, scenario=args.scenario, machine=args.machine,
                                          memory_threshold_pct=args.memory_threshold))


def _check_memory_threshold(value: float) -> None:
    if not math.isfinite(value) or value < 0:
        raise UsageError(f"--memory-threshold {value!r}: must be a finite number of percent >= 0, e.g. 0 (any growth)")


def _cmd_publish(args: argparse.Namespace) -> int:
    from reportgen.site.publish import PublishRequest, run_publish_command

    return run_publish_command(PublishRequest(site=args.site, repo=args.repo, branch=args.branch,
                                              remote=args.remote, push=args.push))


def _cmd_import(args: argparse.Namespace) -> int:
    from reportgen.store.layout import check_label
    from reportgen.traces.importer import ImportRequest, run_import_command

    check_label(args.label or "")
    request = ImportRequest(Path(args.path), args.label or "", args.device or "auto")
    with writing_store(_config(store=args.store)) as store:
        return run_import_command(request, store)


def _cmd_ab(args: argparse.Namespace) -> int:
    from reportgen.ab.command import run_ab_command

    config = _config(store=args.store)  # the working folder's: the store and the defaults below
    with writing_store(config) as store:
        return run_ab_command(ab_request(args, dataclasses.replace(config, store=store)))


def ab_request(args: argparse.Namespace, config: Config) -> AbRequest:
    """The ``ab`` flags as an ``AbRequest``; the config gives the threshold, device and scenario parameters the flags
    leave unset. The library checks the whole request (the folders again, the settings) before measuring."""
    from reportgen.ab.calibration import check_calibrate
    from reportgen.ab.command import AbRequest, check_checkouts
    from reportgen.ab.settings import AbSettings
    from reportgen.config import parse_param_flags
    from reportgen.scenario.loader import parse_dtype, parse_shape

    if args.calibrate:
        check_calibrate(Path(args.base), Path(args.head) if args.head else None)
        args.head = args.base  # the base against itself
    elif args.head is None:
        raise UsageError("--head: give the head checkout's folder (or --calibrate to measure the base against itself)")
    check_checkouts(Path(args.base), Path(args.head))  # the folders first, as before the flags are parsed
    variants = tuple(x.strip() for x in args.variants.split(",") if x.strip()) if args.variants else None
    if args.variants is not None and not variants:
        raise UsageError(f"--variants {args.variants!r}: name at least one variant")
    _check_memory_threshold(args.memory_threshold)
    settings = AbSettings(
        threshold_pct=config.threshold_pct if args.threshold is None else args.threshold,
        precision_pct=args.precision, memory_threshold_pct=args.memory_threshold,
        min_sessions=args.sessions, rounds_per_session=args.rounds, max_seconds=args.max_seconds,
        samples_per_block=args.samples, discard_per_block=args.discard,
        shape=parse_shape(args.shape) if args.shape else None, dtype=parse_dtype(args.dtype) if args.dtype else None,
        seed=args.seed, order_seed=args.order_seed, variants=variants,
        device=config.device if args.device is None else args.device, threads=args.threads, clock=args.clock,
        huge_pages=args.huge_pages, same_cpu=args.same_cpu, params=tuple(sorted(parse_param_flags(args.param).items())),
        param_defaults=tuple(sorted(config.params.items())), calibrate=args.calibrate)
    return AbRequest(Path(args.base), Path(args.head), args.scenario, settings, args.output, args.format,
                     config.store, args.quiet, object_store=object_store(config))


HISTORY_EPILOG = """A step: a change of level in a series' per-run medians (PELT on the logs), kept only when it is at least
2 % and 4 standard errors (segment medians), with 4 runs or more on each side; its size is after/before with a 95 % interval, its
commit range the git commits of the last run before and the first run after. New: the newest run is the first to
show it (the series without its last 1-3 runs had no step within 4 runs of it; at most 8 runs after it), so each
step is new once. See docs/ci-github.md, "Steps on main".

exit codes:
  0  listed (no new step, or --fail-on-step not given)
  1  --fail-on-step: a series has a new step
  3  a bundle of the store is corrupt (named; the others are listed)
"""


def add_history(sub: argparse._SubParsersAction[Any]) -> None:
    """``reportgen history``'s flags."""
    p = sub.add_parser("history", help="list each history series (machine, scenario, parameters, variant) and its "
                       "steps", description="List every history series of the store and the steps found in it.",
                       epilog=HISTORY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scenario", default=None, help="only runs of this scenario")
    p.add_argument("--machine", default=None, help="only runs recorded with this machine name")
    p.add_argument("--json", action="store_true", help="print versioned JSON instead of text")
    p.add_argument("--fail-on-step", action="store_true", help="exit 1 when a series has a new step")
    p.add_argument("--store", default=None, help=STORE_HELP)


def _cmd_history(args: argparse.Namespace) -> int:
    from reportgen.site.history_command import HistoryRequest, run_history_command

    config = _config(store=args.store)
    with reading_store(config) as store:
        return run_history_command(HistoryRequest(store, args.scenario, args.machine, args.json, args.fail_on_step))


COMMANDS: Mapping[str, Callable[[argparse.Namespace], int]] = {
    "profile": _cmd_profile, "runs": _cmd_runs, "build": _cmd_build, "compare": _cmd_compare,
    "publish": _cmd_publish, "import": _cmd_import, "ab": _cmd_ab, "doctor": _cmd_doctor, "machine": _cmd_machine,
    "rm": _cmd_rm,
    "scenarios": _cmd_scenarios, "config": _cmd_config, "init": _cmd_init, "history": _cmd_history,
}
"""Each command of ``cli.build_parser`` and the function that runs it."""
