"""Checking a variant's output against the float64 reference, leaf by leaf, and describing the verdict."""

from __future__ import annotations

from typing import Any

from reportgen.model.run import Correctness
from reportgen.scenario.loader import Tolerance


def check_correctness(out: Any, reference: Any, tol: Tolerance) -> Correctness:
    """allclose against the float64 reference, leaf by leaf when the output is a tuple, list or dict of tensors.

    The structures must match (same container kinds, lengths and keys). Errors are the largest over the
    leaves; relative error is max|diff| / max|ref| of that leaf. Not comparable (None errors) when a
    structure, a shape or a value's finiteness differs in any leaf.
    """
    results = [_check_leaf(o, r, tol) for _path, o, r in _paired_leaves(out, reference)]
    if not results or any(c is None for c in results):
        return Correctness(False, None, None, tol.atol, tol.rtol)
    leaves = [c for c in results if c is not None]
    return Correctness(all(c.passed for c in leaves), max(c.max_abs_error or 0.0 for c in leaves),
                       max(c.max_rel_error or 0.0 for c in leaves), tol.atol, tol.rtol)


def first_bad_leaf(out: Any, reference: Any, tol: Tolerance) -> str | None:
    """The path (``[1]``, ``['out']``) of the first leaf that fails, for a structured output; None otherwise."""
    pairs = _paired_leaves(out, reference)
    if len(pairs) == 1 and pairs[0][0] == "":
        return None
    for path, o, r in pairs:
        c = _check_leaf(o, r, tol)
        if c is None or not c.passed:
            return path or "output"
    return None


def describe_correctness(c: Correctness, bad_leaf: str | None = None) -> str:
    """The verdict in words for the progress line and a variant's error: ok or FAILED, and the largest error."""
    leaf = f" in output {bad_leaf}" if bad_leaf else ""
    if c.max_abs_error is None:
        return f"FAILED{leaf}: output has the wrong structure, shape or non-finite values"
    verdict = "ok" if c.passed else f"FAILED{leaf} (beyond atol={c.atol:g}, rtol={c.rtol:g})"
    return f"{verdict}, max abs error {c.max_abs_error:.3g}"


_MISMATCH = object()


def _paired_leaves(out: Any, ref: Any, path: str = "") -> list[tuple[str, Any, Any]]:
    """``(path, output leaf, reference leaf)``; a structural mismatch pairs the output with ``_MISMATCH``."""
    for kind in (tuple, list):
        if isinstance(ref, kind):
            if not isinstance(out, (tuple, list)) or len(out) != len(ref):
                return [(path or "output", out, _MISMATCH)]
            return [leaf for i, (o, r) in enumerate(zip(out, ref, strict=True))
                    for leaf in _paired_leaves(o, r, f"{path}[{i}]")]
    if isinstance(ref, dict):
        if not isinstance(out, dict) or set(out) != set(ref):
            return [(path or "output", out, _MISMATCH)]
        return [leaf for k in ref for leaf in _paired_leaves(out[k], ref[k], f"{path}[{k!r}]")]
    return [(path, out, ref)]


def _check_leaf(out: Any, reference: Any, tol: Tolerance) -> Correctness | None:
    """One tensor against its reference; None when not comparable (shape, finiteness, type)."""
    import torch

    if reference is _MISMATCH:
        return None
    if not isinstance(reference, torch.Tensor) or not isinstance(out, torch.Tensor):
        same = not isinstance(reference, torch.Tensor) and not isinstance(out, torch.Tensor) and out == reference
        return Correctness(True, 0.0, 0.0, tol.atol, tol.rtol) if same else None
    got = out.detach().to("cpu", torch.float64)
    ref = reference.detach().to("cpu", torch.float64)
    if got.shape != ref.shape or not bool(torch.isfinite(got).all()):
        return None
    diff = (got - ref).abs()
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    max_rel = max_abs / scale if scale > 0 else max_abs
    passed = bool((diff <= tol.atol + tol.rtol * ref.abs()).all())
    return Correctness(passed, max_abs, max_rel, tol.atol, tol.rtol)
