"""Schema migrations: a stored v1 bundle loads, upgrades exactly and builds; a newer schema is refused."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from reportgen import devices
from reportgen.cli import main
from reportgen.errors import BundleError
from reportgen.model import migrations
from reportgen.model.run import SCHEMA_VERSION
from reportgen.store.loader import load_run
from reportgen.store.runjson import parse_run_json, run_to_json

V1_ID = "20261130T050311Z-cpu-base-4be6d1"
V1_BUNDLE = ROOT / "tests" / "data" / "bundles" / "v1" / V1_ID
V1_ENVIRONMENT_V2 = {
    "allocator_env": None, "cpu_count": 2, "cpu_model": "Intel(R) Xeon(R) Processor", "device_extras": {}, "machine": None,
    "device_name": "Intel(R) Xeon(R) Processor", "hostname": "vm", "load_average_1m": None,
    "platform": "Linux-6.18.44-fc-v657-x86_64-with-glibc2.36", "python_version": "3.11.7", "torch_threads": 1,
    "torch_version": "2.13.0+cpu",
}


def _v1_data() -> dict:
    data = json.loads((V1_BUNDLE / "run.json").read_text(encoding="utf-8"))
    assert data["schema_version"] == 1  # the fixture is what it claims to be
    return data


def _drop_nones_absent_from(new: object, old: object) -> object:
    """``new`` without the null-valued keys that ``old`` lacks (recursively; the top-level environment kept)."""
    if isinstance(new, dict) and isinstance(old, dict):
        return {k: (v if k == "environment" else _drop_nones_absent_from(v, old.get(k)))
                for k, v in new.items() if k in old or v is not None}
    if isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        return [_drop_nones_absent_from(a, b) for a, b in zip(new, old, strict=True)]
    return new


def test_schema_is_6_and_every_older_version_has_a_step() -> None:
    assert SCHEMA_VERSION == 6
    assert sorted(migrations.STEPS) == list(range(1, SCHEMA_VERSION))


def test_stored_v1_bundle_loads_as_the_current_schema() -> None:
    run = load_run(V1_BUNDLE)
    assert run.schema_version == SCHEMA_VERSION and run.run_id == V1_ID
    assert run.environment.device_extras == {}
    assert [v.name for v in run.variants] == ["naive", "fused"]
    stored = json.loads(run_to_json(run))
    assert stored["environment"] == V1_ENVIRONMENT_V2
    # Everything but the version and the environment is carried over untouched (fields added since with
    # default None, such as variants[].aten_op_count, read as None).
    old = _v1_data()
    stored.pop("sweep")  # schema 3's field, empty for every older bundle
    stored["peak"] = {k: v for k, v in stored["peak"].items() if k not in ("bandwidth_curve", "cache_levels", "flops_source")}
    assert stored["settings"].pop("cache_flush_bytes") == 0 and stored["settings"].pop("timing_rounds") == 0
    assert _drop_nones_absent_from(stored, old) == {**old, "schema_version": SCHEMA_VERSION, "environment": V1_ENVIRONMENT_V2}


def test_v1_device_fields_become_device_extras_exactly() -> None:
    data = _v1_data()
    data["environment"].update(cuda_version="12.4", driver_version="550.54.15", torch_neuronx_version=None,
                               neuronx_cc_version="2.15.128")
    before = copy.deepcopy(data)
    upgraded = migrations.upgrade(data, "run.json")
    assert data == before  # the caller's dict is not changed
    env = {k: v for k, v in before["environment"].items()
           if k not in ("cuda_version", "driver_version", "torch_neuronx_version", "neuronx_cc_version")}
    assert upgraded == {**before, "schema_version": SCHEMA_VERSION, "environment": {
        **env, "device_extras": {"cuda_version": "12.4", "driver_version": "550.54.15",
                                 "neuronx_cc_version": "2.15.128"}}}
    run = parse_run_json(json.dumps(data), "run.json")
    assert run.environment.device_extras == {"cuda_version": "12.4", "driver_version": "550.54.15",
                                             "neuronx_cc_version": "2.15.128"}
    assert devices.labelled_extras(run.environment) == (("CUDA", "12.4"), ("driver", "550.54.15"), ("neuronx-cc", "2.15.128"))


def test_v1_device_field_of_the_wrong_type_names_the_file_and_field() -> None:
    data = _v1_data()
    data["environment"]["cuda_version"] = 12.4
    with pytest.raises(BundleError) as info:
        parse_run_json(json.dumps(data), "store/r/run.json")
    assert str(info.value) == ("store/r/run.json: field 'environment.cuda_version': expected a string or null, "
                               "got float; the bundle is corrupt, re-run or re-import it")


def test_current_schema_is_not_migrated_and_newer_is_refused() -> None:
    data = json.loads(run_to_json(load_run(V1_BUNDLE)))
    assert migrations.upgrade(data, "run.json") is data
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(BundleError) as info:
        parse_run_json(json.dumps(data), "store/r/run.json")
    assert str(info.value) == (f"store/r/run.json: field 'schema_version' is {SCHEMA_VERSION + 1}, newer than this "
                               f"reportgen reads ({SCHEMA_VERSION}); upgrade reportgen")


def test_v1_bundle_builds_a_site_and_its_file_is_not_rewritten(tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(V1_BUNDLE, store / V1_ID)
    before = (store / V1_ID / "run.json").read_bytes()
    assert main(["build", "--runs", str(store), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "runs" / V1_ID / "index.html").read_text(encoding="utf-8")
    assert "Intel(R) Xeon(R) Processor" in page and "torch 2.13.0+cpu" in page
    assert (store / V1_ID / "run.json").read_bytes() == before  # bundles are immutable: upgraded in memory only


def test_v2_bundle_gains_only_its_version_and_loads_without_a_sweep() -> None:
    data = migrations.upgrade(_v1_data(), "run.json")
    v2 = {**data, "schema_version": 2}
    assert migrations.upgrade(copy.deepcopy(v2), "run.json") == {**v2, "schema_version": SCHEMA_VERSION}  # no A/B pair: no rounds
    run = parse_run_json(json.dumps(v2), "run.json")
    assert run.sweep == () and run.peak.bandwidth_curve == () and run.peak.flops_source == ""


V2_ID = "20261201T215310Z-cpu-v2-fixture-85ba29"
V2_BUNDLE = ROOT / "tests" / "data" / "bundles" / "v2" / V2_ID


def test_stored_v2_bundle_loads_without_a_sweep_and_builds(tmp_path: Path) -> None:
    raw = json.loads((V2_BUNDLE / "run.json").read_text(encoding="utf-8"))
    assert raw["schema_version"] == 2 and "sweep" not in raw  # the fixture is what it claims to be
    run = load_run(V2_BUNDLE)
    assert run.schema_version == SCHEMA_VERSION and run.sweep == () and run.peak.bandwidth_curve == ()
    assert [v.name for v in run.variants] == ["naive", "fused"] and run.settings.cache_flush_bytes == 0
    stored = json.loads(run_to_json(run))
    assert stored["environment"].pop("allocator_env") is None  # added since, with default None: not recorded
    assert [v.pop("memory") for v in stored["variants"]] == [None, None]  # schema 5's, likewise
    assert {k: v for k, v in stored.items() if k not in ("schema_version", "sweep", "peak", "settings")} == {
        k: v for k, v in raw.items() if k not in ("schema_version", "peak", "settings")}
    store = tmp_path / "store"
    shutil.copytree(V2_BUNDLE, store / V2_ID)
    assert main(["build", "--runs", str(store), "--out", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "runs" / V2_ID / "index.html").read_text(encoding="utf-8")
    assert "v2-fixture" in page and 'id="sweep"' not in page


V3_IDS = {"base": "20261202T001751Z-cpu-a-b-base-277060", "head": "20261202T001751Z-cpu-a-b-head-5ab57f"}
V3_STORE = ROOT / "tests" / "data" / "bundles" / "v3"


def test_stored_v3_ab_pair_gets_session_0_on_every_round_and_nothing_else() -> None:
    for side, run_id in V3_IDS.items():
        raw = json.loads((V3_STORE / run_id / "run.json").read_text(encoding="utf-8"))
        assert raw["schema_version"] == 3 and len(raw["ab"]["rounds"]) == 12  # the fixture is what it claims to be
        assert all("session" not in r for r in raw["ab"]["rounds"])
        upgraded = migrations.upgrade(copy.deepcopy(raw), "run.json")
        expected_rounds = [{**r, "session": 0} for r in raw["ab"]["rounds"]]
        assert upgraded == {**raw, "schema_version": SCHEMA_VERSION, "ab": {**raw["ab"], "rounds": expected_rounds}}
        run = load_run(V3_STORE / run_id)
        assert run.ab is not None and run.ab.side == side and {r.session for r in run.ab.rounds} == {0}
        assert run.ab.order_seed is None and run.ab.orders == ()  # schema 6's orders: none recorded before


def test_a_v3_pair_compares_as_one_session_so_a_change_is_never_decided(tmp_path: Path) -> None:
    """One pair of processes cannot measure the difference between processes: compare of the stored schema-3
    pair says 'too few sessions' and never gates on it."""
    out = tmp_path / "compare.json"
    code = main(["compare", V3_IDS["base"], V3_IDS["head"], "--store", str(V3_STORE), "--format", "json",
                 "--fail-on-regression", "--output", str(out)])
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert code == 0 and doc["pairing"] == "interleaved"
    assert {v["name"]: v["paired_sessions"] for v in doc["variants"]} == {"naive": 0, "fused": 0}
    assert all(v["outcome"] in ("no significant change", "inconclusive") for v in doc["variants"])
