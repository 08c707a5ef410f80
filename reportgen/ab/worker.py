"""One side of an A/B pair: ``python -m reportgen.ab.worker``, driven by JSON lines on stdin/stdout.

The worker imports ITS OWN checkout's scenario file (a name resolved through that checkout's config,
``[tool.reportgen] scenarios``, else ``scenarios/NAME.py``), with that checkout's root first on
``sys.path`` (so the user's package is imported from that tree) and as the working folder.
reportgen itself is the coordinator's: it is imported before the path changes.

Protocol (one JSON object per line; the worker answers every command with one line):

- ``{"cmd": "load", "root": DIR, "scenario": REF, "device": "auto", "threads": N|null, "clock": "wall"|"cpu"}`` ->
  ``{"event": "loaded", "scenario": {...}, "device": ..., "environment": {...}}``
- ``{"cmd": "warm", "shape": [..], "dtype": "float32", "seed": 0, "variants": [..], "warmup": 3}`` ->
  ``{"event": "warm", "variants": {name: {"status", "error", "first_call_us", "calls_per_sample", ...}}}``:
  inputs made, every variant compiled, checked against the reference, warmed up and calibrated. With
  ``"brief": true`` (a later session: the coordinator already knows the calls per sample) the warm-up is
  the ``warmup`` calls alone and there is no calibration (``calls_per_sample`` null).
- ``{"cmd": "block", "samples": N, "discard": D, "calls": {name: calls_per_sample}}`` ->
  ``{"event": "block", "samples_us": {name: [N per-call times in µs]}}``, after D untimed samples per variant
- ``{"cmd": "quit"}``: exits.

Any failure answers ``{"event": "error", "stage": ..., "message": one line}`` and exits 1.
The scenario's own prints go to stderr: fd 1 is moved to fd 2 and the protocol keeps the original.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from reportgen.ab.settings import CPU_DEFAULT_THREADS
from reportgen.config import Config, load_config
from reportgen.devices import import_torch, select_backend
from reportgen.devices.backend import Backend
from reportgen.devices.host import fingerprint
from reportgen.errors import ReportgenError
from reportgen.model.codec import to_jsonable
from reportgen.model.run import DeviceKind
from reportgen.profile.correctness import check_correctness
from reportgen.profile.measure import one_line, release_compile_workers
from reportgen.profile.memory import measure_memory_or_reason
from reportgen.profile.timing import CallArgs, calls_per_sample, time_samples, timed_call, warm_up
from reportgen.scenario.loader import Scenario, Variant, load_scenario, scenario_files

MIN_SAMPLE_US = 2000.0
"""Calibration target: a timing sample lasts at least this long (as in ``reportgen profile``)."""


def checkout_config(root: Path) -> Config:
    """The config ``reportgen profile`` would use in the checkout ``root`` (found from there upwards).

    The environment is left out: a checkout's scenarios are the checkout's own.
    """
    return load_config(cwd=root, environ={})


def scenario_path(root: Path, ref: str, config: Config | None = None) -> Path:
    """The scenario file ``ref`` names in the checkout ``root``: a .py path relative to root; else a scenario of
    the checkout's config (``[tool.reportgen] scenarios``, e.g. ``bench/NAME.py``); else ``<root>/scenarios/NAME.py``.

    Raises the config's error when the checkout's config file is broken.
    """
    if ref.endswith(".py"):
        path = Path(ref)
        return path if path.is_absolute() else root / path
    config = config or checkout_config(root)
    return scenario_files(config.scenarios).get(ref, root / "scenarios" / f"{ref}.py")


@dataclass
class _State:
    root: Path | None = None
    scenario: Scenario | None = None
    backend: Backend | None = None
    fns: dict[str, Callable[..., Any]] = field(default_factory=dict)
    call_args: dict[str, CallArgs] = field(default_factory=dict)
    args: tuple[Any, ...] = ()
    clock: Callable[[], int] = time.perf_counter_ns  # what times a sample (the load command may choose CPU time)


def _enter_checkout(root: Path) -> None:
    """The checkout's root (and its ``src/``, for a src-layout package) first on sys.path and as the working
    folder; the launcher's folder dropped. So the user's package comes from this tree, not from what the
    environment has installed (the other checkout's, in CI)."""
    launch = os.getcwd()
    first = [str(root)] + ([str(root / "src")] if (root / "src").is_dir() else [])
    sys.path[:] = first + [p for p in sys.path if p not in ("", launch, *first)]
    os.chdir(root)


def pin_to_cpu(cpu: int | None, one_cpu_thread: bool) -> int | None:
    """Run this worker on ``cpu`` only (the session's, both sides alike) when it measures one thread on the CPU;
    the CPU it is pinned to, or None (not asked, not a one-thread CPU measurement, or the OS cannot pin)."""
    setter = getattr(os, "sched_setaffinity", None)
    if cpu is None or not one_cpu_thread or setter is None:
        return None
    try:
        setter(0, {int(cpu)})
    except OSError:  # a CPU this worker may not use (its own affinity narrower than the coordinator's)
        return None
    return int(cpu)


def _load(state: _State, msg: dict[str, Any]) -> dict[str, Any]:
    root = Path(msg["root"]).resolve()
    _enter_checkout(root)
    torch = import_torch()
    ref = msg["scenario"]
    config = checkout_config(root)
    path = scenario_path(root, ref, config)
    scenario = load_scenario(str(path) if ref.endswith(".py") else ref, root / "scenarios",
                             config_sources=config.scenarios, project_root=config.root)
    backend = select_backend(msg.get("device", "auto"))
    threads = msg.get("threads") or (CPU_DEFAULT_THREADS if backend.kind is DeviceKind.CPU else None)
    if threads:
        torch.set_num_threads(int(threads))
    pinned = pin_to_cpu(msg.get("cpu"), backend.kind is DeviceKind.CPU and threads == 1)
    state.clock = time.process_time_ns if msg.get("clock") == "cpu" else time.perf_counter_ns
    state.root, state.scenario, state.backend = root, scenario, backend
    env = fingerprint(torch, backend.device_name(), backend.environment_extras())
    return {
        "event": "loaded",
        "scenario": {
            "name": scenario.name,
            "description": scenario.description,
            "default_shape": list(scenario.default_shape),
            "default_dtype": scenario.default_dtype,
            "dtypes": sorted(scenario.tolerances),
            "variants": [{"name": v.name, "description": v.description, "compile": v.compile}
                         for v in scenario.variants],
        },
        "device": backend.kind.value,
        "pid": os.getpid(),
        "cpu": pinned,
        "parent_pid": os.getppid(),
        "time_basis": backend.time_basis.value,
        "cache_flush_bytes": backend.cache_flush_bytes(),
        "environment": to_jsonable(env),
    }


def _warm(state: _State, msg: dict[str, Any]) -> dict[str, Any]:
    import torch

    sc, backend = state.scenario, state.backend
    assert sc is not None and backend is not None, "load before warm"
    shape = tuple(int(d) for d in msg["shape"])
    dtype = getattr(torch, msg["dtype"])
    params = sc.resolve_params(dict(msg.get("params") or {}), dict(msg.get("param_defaults") or {}), flag="--param")
    state.args = sc.make(shape, dtype, int(msg.get("seed", 0)), backend.torch_device(), params)
    # later sessions (brief) run the code the first session checked, on the same inputs: no reference, no check
    reference = None if msg.get("brief") else sc.reference(*state.args)
    itemsize = torch.empty((), dtype=dtype).element_size()
    common = {"bytes_per_call": sc.bytes_per_call(shape, itemsize), "flops_per_call": sc.flops_per_call(shape)}
    wanted = set(msg["variants"])
    out: dict[str, Any] = {}
    for variant in sc.variants:
        if variant.name in wanted:
            out[variant.name] = {**common, **_warm_variant(state, variant, reference, sc, msg)}
    return {"event": "warm", "variants": out, "params": {p.name: p.show(params[p.name]) for p in sc.params}}


def _warm_variant(state: _State, variant: Variant, reference: Any, sc: Scenario, msg: dict[str, Any]) -> dict[str, Any]:
    """Compile, first call, correctness, warm-up and calibration of one variant (brief: compile, first call and
    warm-up only); a failure is data."""
    import torch

    backend = state.backend
    assert backend is not None
    try:
        fn = backend.compile(variant.fn) if variant.compile else variant.fn
        call_args = CallArgs(state.args, fresh=variant.inplace)  # an in-place variant gets fresh inputs per call
        first_us, result = timed_call(backend, fn, call_args.one())
        correctness = None if reference is None else check_correctness(result, reference, sc.tolerances[msg["dtype"]])
        if variant.compile:
            release_compile_workers()
        with torch.no_grad():
            if msg.get("brief"):
                warm_up(backend, fn, call_args, int(msg.get("warmup", 3)), budget_s=0.0)
                calls = None
            else:
                warm_up(backend, fn, call_args, int(msg.get("warmup", 3)))
                calls = calls_per_sample(backend, fn, call_args, None, MIN_SAMPLE_US, variant.inplace)
        # memory of one call, in the first session only and before any round: the timed samples never run under it
        memory = None if msg.get("brief") else to_jsonable(measure_memory_or_reason(backend, fn, call_args))
    except Exception as exc:  # the user's variant: its failure is reported, the others go on
        return {"status": "failed", "error": one_line(exc)}
    state.fns[variant.name] = fn
    state.call_args[variant.name] = call_args
    passed = correctness is None or correctness.passed
    return {"status": "ok" if passed else "incorrect", "error": None if passed else "wrong result against the reference",
            "first_call_us": first_us, "calls_per_sample": calls,
            "correctness": None if correctness is None else to_jsonable(correctness),
            "memory": memory}


def _block(state: _State, msg: dict[str, Any]) -> dict[str, Any]:
    import torch

    backend = state.backend
    assert backend is not None
    n, discard = int(msg["samples"]), int(msg.get("discard", 0))
    out: dict[str, list[float]] = {}
    with torch.no_grad():
        for name, calls in msg["calls"].items():
            out[name] = time_samples(backend, state.fns[name], state.call_args[name], discard + n, int(calls),
                                 clock=state.clock)[discard:]
    return {"event": "block", "samples_us": out}


HANDLERS: dict[str, Callable[[_State, dict[str, Any]], dict[str, Any]]] = {
    "load": _load, "warm": _warm, "block": _block}


def serve(stdin: TextIO, proto: TextIO) -> int:
    """Answer commands until ``quit`` or end of input; 1 after an error (already reported on ``proto``)."""
    state = _State()
    for line in stdin:
        msg = json.loads(line)
        cmd = msg.get("cmd")
        if cmd == "quit":
            return 0
        try:
            reply = HANDLERS[cmd](state, msg)
        except ReportgenError as exc:
            reply = {"event": "error", "stage": cmd, "message": exc.message}
        except Exception as exc:  # the user's scenario or package: one line naming what failed
            reply = {"event": "error", "stage": cmd, "message": one_line(exc)}
        proto.write(json.dumps(reply, allow_nan=False) + "\n")
        proto.flush()
        if reply["event"] == "error":
            return 1
    return 0


def main() -> int:
    """Keep the real stdout for the protocol; everything else printed goes to stderr."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return serve(sys.stdin, proto)


def exit_now(code: int) -> None:
    """Leave without tearing the interpreter down: a worker's last reply is written, its compile workers are stopped,
    and unloading torch (about 0.6 s of a session on a 2-core VM, while the next session waits) buys nothing."""
    if "torch._inductor.async_compile" in sys.modules:
        release_compile_workers()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
