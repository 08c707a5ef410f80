"""Steps on main: how reliably ``reportgen.analysis.change_points`` finds steps in histories of this machine's noise.

Noise: the per-session ratios of the stored A/A cells (base and head the same code, ``case == "aa"``) in
``--noise`` files written by ``benchmarks/ab_noise.py`` (``session_changes_pct``: one fresh pair of worker
processes each, so each is the run-to-run change of two separate runs). Their logs, centred on their
median (the A/A side bias is a constant offset, which no step detector sees), are drawn with replacement
into histories of ``--runs`` runs. Used as is they carry the noise of a ratio of two runs, about
sqrt(2) times one run's: a conservative stand-in for one run's median.

Histories with steps get ``--steps-per-history`` steps of one size, up or down at random, at evenly
spaced known runs ("commits"); a step counts as found when a detected step lies within ``--tolerance``
runs of it; every detected step that matches no true one is a false step. Flat histories (unchanged
code) give the false steps per ``--runs`` runs. Deterministic (``--seed``).

    python benchmarks/change_points.py --out benchmarks/results/change_points.json
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np

from reportgen.analysis import change_points as cp
from reportgen.analysis.history import HistoryGroup, HistoryPoint, HistorySeries

FAR_RUNS = 10
"""A false step farther than this from every true step cannot be a true one placed a few runs off."""
DEFAULT_NOISE = ("benchmarks/results/ab_noise_fine_idle.json", "benchmarks/results/ab_noise_fine_busy.json")


def aa_log_ratios(paths: list[Path]) -> np.ndarray:
    """Every A/A session's log ratio in these ab_noise results, each file's centred on its median."""
    out = []
    for path in paths:
        data = json.loads(path.read_text())
        logs = [math.log1p(x / 100.0)
                for group in data["groups"] for cell in group["cells"] if cell["case"] == "aa"
                for run in cell["runs"] for v in run.get("variants", {}).values()
                for x in v.get("session_changes_pct", [])]
        out.append(np.asarray(logs) - np.median(logs))
    return np.concatenate(out)


def simulate(noise: np.ndarray, rng: np.random.Generator, runs: int, size_pct: float, steps: int
             ) -> tuple[np.ndarray, list[int]]:
    """One history of ``runs`` runs with ``steps`` steps of ``size_pct`` (random sign) at evenly spaced runs."""
    at = [round(runs * (i + 1) / (steps + 1)) for i in range(steps)] if size_pct else []
    level = np.zeros(runs)
    for index in at:
        level[index:] += math.log1p(size_pct / 100.0) * (1 if rng.random() < 0.5 else -1)
    return 100.0 * np.exp(level + rng.choice(noise, size=runs)), at


def score(found: list[int], true: list[int], tolerance: int) -> tuple[int, int]:
    """(true steps found within ``tolerance`` runs, detected steps matching none)."""
    hits = sum(1 for t in true if any(abs(f - t) <= tolerance for f in found))
    false = sum(1 for f in found if not any(abs(f - t) <= tolerance for t in true))
    return hits, false


def alarms_while_pushing(values: np.ndarray, first: int) -> list[tuple[int, int]]:
    """Push mode: (runs so far, step index) for each new step reported as runs ``first``.. arrive one by one."""
    out = []
    for n in range(first, len(values) + 1):
        points = tuple(HistoryPoint(f"r{i}", f"t{i}", float(v), float(v), float(v), None)
                       for i, v in enumerate(values[:n]))
        group = HistoryGroup("k", "t", "cpu", "s", (), tuple(p.run_id for p in points),
                             tuple(p.created_utc for p in points), (HistorySeries("v", points),))
        out += [(n, s.step.index) for s in cp.series_steps(group)[0].steps if s.new]
    return out


def push_rows(noise: np.ndarray, rng: np.random.Generator, histories: int, runs: int, sizes: list[float],
              tolerance: int) -> list[dict[str, object]]:
    """Push mode, run by run: false alarms on unchanged code, and for a step at run 3/4 of the history, the runs
    after it until the first alarm (and whether that alarm's step lies within ``tolerance`` runs of it)."""
    rows: list[dict[str, object]] = []
    for size in [0.0, *sizes]:
        at = 3 * runs // 4
        false = caught = placed = 0
        delays: list[int] = []
        for _ in range(histories):
            values, _true = simulate(noise, rng, runs, 0.0, 0)
            if size:
                values[at:] *= 1 + size / 100.0
            alarms = alarms_while_pushing(values, 2 * cp.MIN_SEGMENT if not size else at)
            hits = [(n, i) for n, i in alarms if size and n > at and abs(i - at) <= tolerance + cp.MIN_SEGMENT]
            false += len(alarms) - len(hits[:1])
            if hits:
                caught, placed = caught + 1, placed + (abs(hits[0][1] - at) <= tolerance)
                delays.append(hits[0][0] - at)
        rows.append({"step_pct": size, "histories": histories, "pushes_per_history": runs - (at if size else
                     2 * cp.MIN_SEGMENT) + 1, "false_alarms": false, "steps_alarmed": caught if size else None,
                     "alarm_within_tolerance": placed if size else None,
                     "median_runs_after_step_to_alarm": float(np.median(delays)) if delays else None})
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--noise", action="append", type=Path, default=None)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--histories", type=int, default=200, help="histories per step size, and flat ones")
    p.add_argument("--steps-per-history", type=int, default=4)
    p.add_argument("--sizes", default="5,10,25")
    p.add_argument("--tolerance", type=int, default=2)
    p.add_argument("--push-histories", type=int, default=40, help="histories replayed run by run (push mode)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args()
    paths = a.noise or [Path(x) for x in DEFAULT_NOISE]
    noise = aa_log_ratios(paths)
    rng = np.random.default_rng(a.seed)
    started = time.perf_counter()
    rows = []
    for size in [0.0, *(float(x) for x in a.sizes.split(","))]:
        hits = false = far = total = 0
        offsets: list[int] = []
        for _ in range(a.histories):
            values, at = simulate(noise, rng, a.runs, size, a.steps_per_history)
            found = [s.index for s in cp.detect_steps(list(values))]
            h, f = score(found, at, a.tolerance)
            hits, false, total = hits + h, false + f, total + len(at)
            far += score(found, at, FAR_RUNS)[1]
            offsets += [min((f - t for f in found), key=abs) for t in at if found]
        rows.append({"step_pct": size, "histories": a.histories, "true_steps": total, "found_within_tolerance": hits,
                     "detection_rate": hits / total if total else None, "false_steps": false,
                     "false_steps_per_history": false / a.histories, f"false_steps_over_{FAR_RUNS}_runs_from_a_true_one": far,
                     "median_abs_offset_runs": float(np.median(np.abs(offsets))) if offsets else None})
        print(json.dumps(rows[-1]), file=sys.stderr)
    pushes = push_rows(noise, rng, a.push_histories, a.runs, [float(x) for x in a.sizes.split(",")], a.tolerance)
    result = {
        "schema_version": 1, "benchmark": "change_points",
        "command": "python " + " ".join([sys.argv[0], *sys.argv[1:]]),
        "machine": {"hostname": platform.node(), "python": platform.python_version()},
        "noise": {"files": [str(x) for x in paths], "aa_session_ratios": int(noise.size),
                  "sd_pct": float(np.std(noise) * 100), "robust_sd_pct": float(1.4826 * np.median(np.abs(noise)) * 100)},
        "settings": {"runs": a.runs, "histories": a.histories, "steps_per_history": a.steps_per_history,
                     "tolerance_runs": a.tolerance, "seed": a.seed, "min_relative": cp.MIN_RELATIVE,
                     "min_segment": cp.MIN_SEGMENT, "min_z": cp.MIN_Z, "penalty_per_log_n": cp.PENALTY_PER_LOG_N},
        "rows": rows, "push_mode": pushes, "seconds": round(time.perf_counter() - started, 1),
    }
    if a.out:
        a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("noise", "rows", "push_mode")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
