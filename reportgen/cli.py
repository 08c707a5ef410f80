"""The command line: the parser (every command's flags, help and exit-code epilog) and ``main``.

argparse stops here and in ``commands.py``, which turns each command's Namespace into the library's typed
request. Errors become one line and an exit code here, and only here: a ReportgenError, an OSError the user can
act on (``errors.from_os_error``), an argument or file name that is not UTF-8, and Ctrl-C (exit 130) wherever it
lands, even while the commands' modules are still being imported (so they are imported inside ``main``).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reportgen import __version__
from reportgen.cli_text import AB_EPILOG, COMPARE_EPILOG, EXIT_CODES_HELP, PUBLISH_EPILOG
from reportgen.errors import ExitCode, ReportgenError, UsageError, from_os_error
from reportgen.store.location import STORE_HELP
from reportgen.text.terminal import terminal_safe

if TYPE_CHECKING:
    from typing import TypeAlias

    Subcommands: TypeAlias = "argparse._SubParsersAction[_Parser]"


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError instead of printing usage and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message} (see '{self.prog} --help')")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; every command has --help. ``command``: register that command's parser only (the others
    import modules that the command does not need: building them all took about 0.2 s of every command)."""
    parser = _Parser(prog="reportgen", epilog=EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
                     description="Profile operator variants and publish the evidence as a versioned static site.")
    parser.add_argument("--version", action="version", version=f"reportgen {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    registers = _registers()
    for register in [registers[command]] if command in registers else registers.values():
        register(sub)
    return parser


def _registers() -> dict[str, Callable[[Subcommands], None]]:
    """Each command's name and the function that adds its parser, in the order ``--help`` lists them."""
    from reportgen.commands import add_history  # its flags live beside its handler (this module is at its size cap)

    return {"profile": _add_profile, "runs": _add_runs, "build": _add_build, "compare": _add_compare,
            "publish": _add_publish, "import": _add_import, "ab": _add_ab, "doctor": _add_doctor,
            "machine": _add_machine, "rm": _add_rm, "scenarios": _add_scenarios, "config": _add_config,
            "init": _add_init, "history": add_history}


def _store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", default=None, help=STORE_HELP)


def _add_profile(sub: Subcommands) -> None:
    from reportgen import devices

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


def _add_runs(sub: Subcommands) -> None:
    p = sub.add_parser("runs", help="list stored runs", description="List the runs in the store, oldest first.")
    p.add_argument("--scenario", default=None, help="only runs of this scenario")
    p.add_argument("--machine", default=None, help="only runs recorded with this machine name")
    p.add_argument("--all", action="store_true", help="include withdrawn runs")
    _store_arg(p)


def _add_rm(sub: Subcommands) -> None:
    p = sub.add_parser("rm", help="withdraw a run from the history (the bundle is kept)",
                       description="Withdraw RUN (an id, latest~N, a label or a git sha): history, latest~N and "
                       "'reportgen runs' skip it; its permanent page says it was withdrawn and why.")
    p.add_argument("run")
    p.add_argument("--reason", required=True, help="why, in one line (shown on the run's page)")
    p.add_argument("--scenario", default=None, help="latest~N counts runs of this scenario (default: the newest's)")
    p.add_argument("--machine", default=None, help="latest~N counts runs of this machine (default: the newest's)")
    _store_arg(p)


def _add_scenarios(sub: Subcommands) -> None:
    p = sub.add_parser("scenarios", help="list the scenarios found, with their variants and parameters",
                       description="List the config's scenarios and the built-in ones (loading each: needs torch).")
    p.add_argument("--names", action="store_true",
                   help="only the names 'reportgen profile' runs without --scenario (the config's scenarios, else "
                   "rmsnorm), one per line, without loading them")


def _add_config(sub: Subcommands) -> None:
    sub.add_parser("config", help="print the effective configuration and where each value came from",
                   description="Print the settings from [tool.reportgen] in pyproject.toml or reportgen.toml "
                   "(found from the working directory upwards), environment variables and defaults.")


def _add_init(sub: Subcommands) -> None:
    p = sub.add_parser("init", help="write a config, an example scenario and a CI workflow into this repository",
                       description="Write reportgen.toml, bench/example_scenario.py and "
                       ".github/workflows/reportgen.yml; never overwrites a file (exit 6 naming it).")
    p.add_argument("--dir", type=Path, default=Path("."), help="repository folder (default: the current one)")
    p.add_argument("--action-ref", default=None, help="the reportgen action the workflow uses (default: "
                   "<this reportgen's repository>@v<version>)")


def _add_build(sub: Subcommands) -> None:
    p = sub.add_parser("build", help="build the static report site from stored runs",
                       description="Render every stored run into a versioned static site (HTML and Markdown).")
    p.add_argument("--runs", default=None, help=STORE_HELP)
    p.add_argument("--out", type=Path, default=None, help="site folder (default: the config's site, else site/)")
    p.add_argument("--base-url", default=None,
                   help="sub-path the site is served under, e.g. /myrepo/ (default: the config's, else /)")
    p.add_argument("--strict", action="store_true",
                   help="a warning (e.g. a corrupt run.json left out) fails the build with exit 3; the old site "
                   "is left untouched")
    p.add_argument("--keep-traces", type=int, default=None, metavar="N",
                   help="retention: full pages (op tables, timelines, traces, device artifacts) only for the latest N "
                   "runs of each history series; older pages are compact, with every figure in a gzipped run.json "
                   "(default: full pages for all)")
    p.add_argument("--verify", action="store_true",
                   help="also check every stored run.json and every published page against what the last build "
                   "recorded (one file check per run; for a store or site changed by hand), and redraw what "
                   "changed; without it a build trusts them, as bundles and pages are written once")


def _add_compare(sub: Subcommands) -> None:
    p = sub.add_parser("compare", help="compare two runs as a PR comment (Markdown) with a CI exit code",
                       description="Compare BASE and HEAD (run ids, run folders, latest or latest~N).",
                       epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base")
    p.add_argument("head")
    p.add_argument("--threshold", type=float, default=None,
                   help="smallest change in percent that counts (default: the config's, else 5)")
    p.add_argument("--scenario", default=None, help="latest~N counts runs of this scenario (default: the newest's)")
    p.add_argument("--machine", default=None, help="latest~N counts runs of this machine (default: the newest's)")
    p.add_argument("--memory-threshold", type=float, default=0.0,
                   help="growth of memory per call in percent that counts as a regression (default 0: any, where exact)")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit 1 when any variant is significantly slower or its memory per call grew")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--site-url", default=None, help="URL of the published site, to link both runs' pages")
    p.add_argument("--output", type=Path, default=None, help="write to this file instead of stdout")
    _store_arg(p)


def _add_publish(sub: Subcommands) -> None:
    p = sub.add_parser("publish", help="commit the built site to the gh-pages branch",
                       description="Commit the built site to a gh-pages branch, keeping what it already holds.",
                       epilog=PUBLISH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--site", type=Path, default=Path("site"))
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: the current one)")
    p.add_argument("--branch", default="gh-pages")
    p.add_argument("--remote", default="origin")
    p.add_argument("--push", action="store_true", help="push the branch to --remote afterwards")


def _add_import(sub: Subcommands) -> None:
    from reportgen import devices

    p = sub.add_parser("import", help="import an existing trace or TorchNeuron profile_output/ as a run",
                       description="Turn a Kineto/Chrome trace (.json, .json.gz), a folder of them, or a "
                       "TorchNeuron profile_output/ folder into a run bundle.")
    p.add_argument("path", type=Path)
    p.add_argument("--label", default="")
    p.add_argument("--device", choices=["auto", *devices.device_names()], default="auto")
    _store_arg(p)


def _add_doctor(sub: Subcommands) -> None:
    p = sub.add_parser("doctor", help="profile on a device and write a diagnostics bundle to attach to an issue",
                       description="Run 'reportgen profile --device neuron' and collect versions, neuron-ls -j, "
                       "settings, the run bundle and neuron-explorer's raw outputs into --out and --out.tar.gz.")
    p.add_argument("--device", choices=["neuron"], required=True)
    p.add_argument("--out", type=Path, default=Path("reportgen-doctor"), help="new folder (default: reportgen-doctor)")
    p.add_argument("--scenario", default="rmsnorm")
    p.add_argument("--profile-output", type=Path, default=None, help="also inventory an existing profile_output/")
    p.add_argument("--timeout-s", type=float, default=3600.0, help="limit for the profile run (default 3600)")


def _add_machine(sub: Subcommands) -> None:
    p = sub.add_parser("machine", help="what reportgen detects here and what a run here is compared against",
                       description="The device, instance, chip, LNC, cores, software versions, the bandwidth ceiling "
                       "and the compute roofs per dtype (per engine on Trainium) a run on this machine is compared "
                       "against, each with its source: documented, measured by each profile run, reported by a "
                       "tool, or assumed. Measures nothing and imports no torch; what it cannot find it names.")
    p.add_argument("--device", choices=["auto", "cpu", "cuda", "neuron"], default="auto",
                   help="the device to describe (auto: neuron where neuron-ls is installed, else cuda where "
                   "nvidia-smi is, else cpu)")
    p.add_argument("--json", action="store_true", help="print versioned JSON instead of text")


def _add_ab(sub: Subcommands) -> None:
    from reportgen.ab.settings import CLOCKS, AbSettings

    p = sub.add_parser("ab", help="interleaved A/B profiling of two checkouts: a PR verdict with an exit code",
                       description="Measure BASE and HEAD checkouts in interleaved rounds on this machine and print a "
                       "PR comment.", epilog=AB_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="the base checkout's folder")
    p.add_argument("--head", default=None, help="the head checkout's folder (required unless --calibrate)")
    p.add_argument("--calibrate", action="store_true",
                   help="measure the base against itself (an A/A of 20 sessions, or --sessions if more), store it, "
                   "and report what this runner's gate can see: its false-alarm rate and the smallest change it "
                   "detects within --max-seconds at --threshold; later pairs in the same store state it in their "
                   "comment")
    p.add_argument("--scenario", default="rmsnorm",
                   help="a name (each checkout's config scenarios, else its scenarios/) or a .py path relative to it")
    p.add_argument("--threshold", type=float, default=None,
                   help="smallest change in percent that counts (default: the config's, else 5)")
    p.add_argument("--memory-threshold", type=float, default=0.0,
                   help="growth of memory per call in percent that counts as a regression (default 0: any, where exact)")
    d = AbSettings()
    p.add_argument("--precision", type=float, default=d.precision_pct,
                   help="a 'no change' waits, within the budget, until its interval is at most ± this many percent "
                   f"wide, so that its printed change can be read (default {d.precision_pct:g}; 0: stop at the "
                   "first interval inside the threshold)")
    p.add_argument("--sessions", type=int, default=d.min_sessions,
                   help=f"sessions (fresh pairs of worker processes) before the first verdict (>= 6; default {d.min_sessions})")
    p.add_argument("--rounds", type=int, default=d.rounds_per_session,
                   help=f"rounds per session (even, >= 2; default {d.rounds_per_session})")
    p.add_argument("--max-seconds", type=float, default=d.max_seconds,
                   help="time budget for the whole measurement: loading, compiling and rounds of every session "
                   f"(default {d.max_seconds:g})")
    p.add_argument("--samples", type=int, default=d.samples_per_block,
                   help=f"samples per variant per side per round (default {d.samples_per_block})")
    p.add_argument("--discard", type=int, default=d.discard_per_block,
                   help="untimed samples before each block's timed ones, in both sides alike (default "
                   f"{d.discard_per_block})")
    p.add_argument("--shape", default=None, help="input shape, comma-separated (default: the base scenario's)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default: the base scenario's)")
    p.add_argument("--seed", type=int, default=0, help="the inputs' random seed (default 0)")
    p.add_argument("--order-seed", type=int, default=None,
                   help="replay the sessions' order (which side is started first and which opens each session) "
                   "from this seed, as recorded in a pair's JSON and stored runs (default: a new one each pair)")
    p.add_argument("--variants", default=None, help="comma-separated subset of variants")
    p.add_argument("--param", action="append", default=None, metavar="NAME=VALUE",
                   help="a scenario parameter in both workers (repeatable), e.g. --param eps=1e-5 (default: the "
                   "config's params, else the scenario's own defaults)")
    p.add_argument("--device", choices=["auto", "neuron", "cuda", "cpu"], default=None,
                   help="default: the config's, else auto")
    p.add_argument("--threads", type=int, default=None,
                   help="torch intra-op threads in both workers (default: 1 on the CPU, where one thread decides on a "
                   "shared machine; torch's default elsewhere), e.g. --threads 8 to measure the multi-threaded case")
    p.add_argument("--clock", choices=CLOCKS, default=d.clock,
                   help="what times a sample: the wall clock (default), or each worker's CPU time (CPU device only; "
                   "not slowed by other processes taking the core)")
    p.add_argument("--huge-pages", action=argparse.BooleanOptionalAction, default=None,
                   help="CPU: both workers' torch allocator takes transparent huge pages for large tensors (default: "
                   "on where the kernel gives them on request; --no-huge-pages: 4 KiB pages) (THP_MEM_ALLOC_ENABLE=1): far "
                   "fewer page faults per call; see docs/ab-testing.md")
    p.add_argument("--same-cpu", action=argparse.BooleanOptionalAction, default=d.same_cpu,
                   help="CPU, one thread: both workers of a session run on one CPU, the sessions taking the CPUs in "
                   "turn (default; --no-same-cpu: the scheduler places them); see docs/ab-testing.md")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown")
    p.add_argument("--output", type=Path, default=None, help="write to this file instead of stdout")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    _store_arg(p)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse, dispatch, and turn every failure into one line on stderr and its exit code."""
    try:
        return _dispatch(sys.argv[1:] if argv is None else list(argv))
    except ReportgenError as exc:
        return _refuse(exc)
    except KeyboardInterrupt:
        return _interrupted()
    except Exception as exc:
        known = _user_error(exc)
        if known is not None:
            return _refuse(known)
        if _caused_by_interrupt(exc):  # Ctrl-C inside a C extension's import surfaces as its ImportError
            return _interrupted()
        if os.environ.get("REPORTGEN_DEBUG"):
            raise
        import traceback

        last = traceback.format_exc().strip().splitlines()[-1]
        print(f"reportgen: internal error: {terminal_safe(last)} (set REPORTGEN_DEBUG=1 for the traceback)",
              file=sys.stderr)
        return ExitCode.INTERNAL


def _dispatch(argv: list[str]) -> int:
    _check_utf8_arguments(argv)
    from reportgen.commands import COMMANDS

    args = build_parser(argv[0] if argv else None).parse_args(argv)
    command = COMMANDS.get(args.command) if args.command else None
    if command is None:
        build_parser().print_help()
        return ExitCode.USAGE
    return int(command(args))


def _check_utf8_arguments(argv: list[str]) -> None:
    """Refuse an argument holding bytes that are not UTF-8 (Python passes them on as lone surrogates)."""
    for i, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise UsageError(f"argument {i} '{shown[:120]}': not valid UTF-8; reportgen takes UTF-8 arguments "
                             "(rename the file or folder)") from None


_SYMLINK_LOOP = "Symlink loop from "


def _user_error(exc: Exception) -> ReportgenError | None:
    """The one-line error for an exception caused by the environment or the input, not by a bug; else None."""
    if isinstance(exc, OSError):
        return from_os_error(exc)
    if isinstance(exc, RuntimeError) and str(exc).startswith(_SYMLINK_LOOP):  # Path.resolve() before Python 3.13
        path = str(exc)[len(_SYMLINK_LOOP):].strip("'")
        return from_os_error(OSError(errno.ELOOP, os.strerror(errno.ELOOP), path))
    if isinstance(exc, UnicodeError):  # a file name or environment value that is not UTF-8, met on the way
        reason = getattr(exc, "reason", "")
        return ReportgenError(f"{_unicode_object(exc)}: not valid UTF-8 text ({reason}); use UTF-8 names and text "
                              "(rename the file or folder)")
    return None


def _unicode_object(exc: UnicodeError) -> str:
    obj = getattr(exc, "object", b"")
    text = obj.decode("utf-8", "backslashreplace") if isinstance(obj, bytes) else str(obj)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text[:120] + ("\u2026" if len(text) > 120 else "")


def _caused_by_interrupt(exc: BaseException) -> bool:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _refuse(exc: ReportgenError) -> int:
    print(f"reportgen: error: {terminal_safe(exc.as_flag_message())}", file=sys.stderr)
    return int(exc.exit_code)


def _interrupted() -> int:
    print("reportgen: interrupted; stored runs and the site are unchanged", file=sys.stderr)
    return 130
