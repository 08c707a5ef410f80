"""Upgrades of stored ``run.json`` data, one step per schema version (as asv's ``update_to_N``).

``STEPS[n]`` turns the raw JSON dict of version ``n`` into version ``n + 1``. Steps are history:
they name the fields as they were then, never the current model or the device registry, so an
old bundle upgrades the same way whatever reportgen grows later. A bundle is upgraded in memory
when it is read; the file on disk is never rewritten (bundles are immutable).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from reportgen.errors import BundleError
from reportgen.model.run import SCHEMA_VERSION

RawRun = dict[str, Any]

V1_DEVICE_FIELDS = ("cuda_version", "driver_version", "torch_neuronx_version", "neuronx_cc_version")
"""Schema 1's device-specific ``environment`` fields, which schema 2 keeps in ``environment.device_extras``."""


def _v1_to_v2(data: RawRun, source: Path | str) -> RawRun:
    """Move the device-specific environment fields into ``environment.device_extras`` (nulls dropped)."""
    env = data.get("environment")
    if isinstance(env, dict):
        env = dict(env)
        extras: dict[str, str] = {}
        for name in V1_DEVICE_FIELDS:
            value = env.pop(name, None)
            if value is None:
                continue
            if not isinstance(value, str):
                raise BundleError(f"{source}: field 'environment.{name}': expected a string or null, got "
                                  f"{type(value).__name__}; the bundle is corrupt, re-run or re-import it")
            extras[name] = value
        env["device_extras"] = extras
        data = {**data, "environment": env}
    return {**data, "schema_version": 2}


def _v2_to_v3(data: RawRun, source: Path | str) -> RawRun:
    """Schema 3 only adds optional fields (sweeps, bandwidth curve, cache levels): nothing to move."""
    return {**data, "schema_version": 3}


def _v3_to_v4(data: RawRun, source: Path | str) -> RawRun:
    """Schema 4 runs an A/B pair in sessions (pairs of worker processes): a schema-3 pair ran in one, session 0."""
    ab = data.get("ab")
    if isinstance(ab, dict) and isinstance(ab.get("rounds"), list):
        rounds = [{**r, "session": 0} if isinstance(r, dict) else r for r in ab["rounds"]]
        data = {**data, "ab": {**ab, "rounds": rounds}}
    return {**data, "schema_version": 4}


def _v4_to_v5(data: RawRun, source: Path | str) -> RawRun:
    """Schema 5 only adds the optional ``variants[].memory``: older runs measured none, so nothing moves."""
    return {**data, "schema_version": 5}


def _v5_to_v6(data: RawRun, source: Path | str) -> RawRun:
    """Schema 6 only adds an A/B pair's optional ``ab.order_seed`` and ``ab.orders``: older pairs recorded none (base
    was started first and opened every session), so nothing moves."""
    return {**data, "schema_version": 6}


STEPS: dict[int, Callable[[RawRun, Path | str], RawRun]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4, 4: _v4_to_v5,
                                                            5: _v5_to_v6}


def upgrade(data: RawRun, source: Path | str) -> RawRun:
    """``data`` (a checked ``schema_version`` <= SCHEMA_VERSION) upgraded step by step to SCHEMA_VERSION."""
    version = data["schema_version"]
    while version < SCHEMA_VERSION:
        data = STEPS[version](data, source)
        version = data["schema_version"]
    return data
