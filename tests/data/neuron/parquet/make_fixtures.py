"""Write the Parquet fixtures in this folder FROM THE SCHEMA REFERENCE (not from a capture): run it to regenerate.

``python tests/data/neuron/parquet/make_fixtures.py`` (needs pyarrow). Table names, field names,
types and units are those of ``tools/neuron-explorer/profile-schema-reference.rst`` in
aws-neuron/aws-neuron-sdk (schema 7.4.0, Neuron 2.31; file as of commit 81ce03ae, Aug 2026). Every
required field of the tables written is present; optional fields only where a value is given.
OpenAPI's ``number (float)`` is written as a 32-bit float (assumed; the tool may write doubles),
``integer (int32)`` / ``integer (int64)`` as int32 / int64. The values are made up, chosen so the
expected figures are exact (see README.md); nothing here was measured on Trainium.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
TYPES = {"string": (pa.string(), "string", None), "int64": (pa.int64(), "integer", "int64"),
         "int32": (pa.int32(), "integer", "int32"), "float": (pa.float32(), "number", "float"),
         "bool": (pa.bool_(), "boolean", None)}

# (field, type, unit, required) as the schema reference lists them, for the fields written.
SCHEMA: dict[str, tuple[str, list[tuple[str, str, str, bool]]]] = {
    "Metadata": ("Metadata associated with this profile, including details about the system configuration.", [
        ("profile_schema_version", "string", "", True), ("ntff_version", "int32", "", True),
        ("num_physical_cores", "int32", "", True), ("vnc_enabled", "bool", "", True),
        ("first_hw_timestamp", "int64", "nanoseconds", True), ("last_hw_timestamp", "int64", "nanoseconds", True),
        ("first_ts", "string", "", True), ("last_ts", "string", "", True),
        ("dma_ddr_bandwidth", "float", "bytes_per_second", True), ("num_dma_engines_per_neuroncore", "int32", "", True),
        ("hbm_ddr_bandwidth", "float", "bytes_per_second", True), ("tensor_engine_num_rows", "int64", "", True),
        ("tensor_engine_num_cols", "int64", "", True), ("tensor_engine_clock_freq", "float", "gigahertz", True),
        ("vector_engine_clock_freq", "float", "gigahertz", True), ("vector_engine_num_channels", "int64", "", True),
        ("scalar_engine_clock_freq", "float", "gigahertz", True), ("scalar_engine_num_channels", "int64", "", True),
        ("gpsimd_engine_clock_freq", "float", "gigahertz", True), ("gpsimd_engine_num_channels", "int64", "", True),
        ("neuroncore_clock_freq", "float", "gigahertz", True), ("ticks_per_nanosec", "int64", "", True),
        ("instance_type", "string", "", False), ("runtime_version", "string", "", False),
        ("driver_version", "string", "", False), ("explorer_version", "string", "", False),
        ("compiler_version", "string", "", False), ("neuroncore_idx", "int64", "", False)]),
    "Summary": ("Profile performance metrics which summarize execution.", [
        ("total_time", "float", "seconds", False), ("total_active_time", "float", "seconds", False),
        ("total_active_time_percent", "float", "percent", False), ("model_flops", "int64", "flops", False),
        ("hardware_flops", "int64", "flops", False), ("peak_flops_bandwidth_ratio", "float", "", False),
        ("dma_transfer_count", "int64", "", False), ("hbm_read_bytes", "int64", "bytes", False),
        ("hbm_write_bytes", "int64", "bytes", False), ("spill_save_bytes", "int64", "bytes", False),
        ("spill_reload_bytes", "int64", "bytes", False), ("mbu_estimated_percent", "float", "percent", False),
        ("mbu_min_read_util_percent", "float", "percent", False), ("mfu_estimated_percent", "float", "percent", False),
        ("hfu_estimated_percent", "float", "percent", False),
        ("tensor_engine_active_time_percent", "float", "percent", False),
        ("tensor_engine_instruction_count", "int64", "", False),
        ("vector_engine_active_time", "float", "seconds", False),
        ("vector_engine_active_time_percent", "float", "percent", False),
        ("vector_engine_instruction_count", "int64", "", False),
        ("scalar_engine_active_time_percent", "float", "percent", False),
        ("scalar_engine_instruction_count", "int64", "", False),
        ("sync_engine_active_time_percent", "float", "percent", False)]),
    "ExecutionInfo": ("Per-execution information for profiles with one or more executions.", [
        ("execution_index", "int32", "", True), ("neff_name", "string", "", False),
        ("execution_start_ts", "int64", "nanoseconds", False), ("execution_end_ts", "int64", "nanoseconds", False),
        ("num_subgraphs", "int32", "", False), ("row_count", "int64", "", False)]),
    "SystemProfileEvents": ("This table contains system profile events, which are generated from the Neuron Runtime, "
                            "the framework code, or the Python application.", [
        ("id", "int64", "", True), ("name", "string", "", True), ("start_ts", "int64", "nanoseconds", True),
        ("end_ts", "int64", "nanoseconds", True), ("duration_ns", "int64", "nanoseconds", True),
        ("trace_event_source", "string", "", True), ("instance_id", "string", "", True),
        ("process_id", "int64", "", True), ("thread_id", "int64", "", True), ("nc_idx", "int64", "", False)]),
}
SCHEMA_FIELDS = [("table_name", "string", "", True), ("table_description", "string", "", True),
                 ("field_name", "string", "", True), ("field_description", "string", "", True),
                 ("field_type", "string", "", True), ("field_required", "bool", "", True),
                 ("field_format", "string", "", False), ("field_unit", "string", "", False)]

STEPS = 3
STEP_NS = 1_000_000
FIRST_NS = 200_000
GAP_NS = 10_000
HBM_STACK = 725e9  # bytes/s: Trn2's 2.9 TB/s over 4 stacks (Metadata.hbm_ddr_bandwidth is one stack's)
CASES: dict[str, dict[str, Any]] = {
    # naive eager: one NEFF per op, three per call (durations in ns), 3 profiled steps
    "naive": {"neffs": [("neff_a1_vnc_0.neff", 120_000), ("neff_b2_vnc_0.neff", 40_000),
                        ("neff_c3_vnc_0.neff", 90_000)],
              "read": 37_748_736, "write": 25_165_824, "active": 0.0007, "split": True},
    "fused": {"neffs": [("neff_f1_vnc_0.neff", 45_000)], "read": 12_582_912, "write": 12_582_912,
              "active": 0.00012},
    "compiled": {"neffs": [("neff_d4_vnc_0.neff", 42_000)], "read": 12_582_912, "write": 12_582_912,
                 "active": 0.00011},
    "schema8": {"neffs": [("neff_f1_vnc_0.neff", 45_000)], "read": 12_582_912, "write": 12_582_912,
                "active": 0.00012, "version": "8.0.0"},
}


def executions(neffs: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """Every execution of every NEFF, step after step, GAP_NS apart within a step."""
    rows = []
    for step in range(STEPS):
        ts = FIRST_NS + step * STEP_NS
        for name, duration in neffs:
            rows.append({"execution_index": len(rows), "neff_name": name, "execution_start_ts": ts,
                         "execution_end_ts": ts + duration, "num_subgraphs": 2, "row_count": 1000})
            ts += duration + GAP_NS
    return rows


def events(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """nrt_execute (runtime) and nc_exec_running (device) per execution on NeuronCore 0, one framework event per
    step (no nc_idx), and one nc_exec_running of NeuronCore 1 (another core: not counted)."""
    rows: list[dict[str, Any]] = []

    def add(name: str, source: str, start: int, end: int, nc: int | None) -> None:
        rows.append({"id": len(rows) + 1, "name": name, "start_ts": start, "end_ts": end, "duration_ns": end - start,
                     "trace_event_source": source, "instance_id": "i-0fixture", "process_id": 4242,
                     "thread_id": 7, "nc_idx": nc})

    for run in runs:
        add("nrt_execute", "neuron_rt", run["execution_start_ts"] - 5_000, run["execution_end_ts"] + 2_000, 0)
        add("nc_exec_running", "neuron_hw", run["execution_start_ts"], run["execution_end_ts"], 0)
    for step in range(STEPS):
        add("aten::rms_norm", "framework", FIRST_NS + step * STEP_NS - 20_000, FIRST_NS + step * STEP_NS, None)
    add("nc_exec_running", "neuron_hw", FIRST_NS, FIRST_NS + 1_000, 1)
    return rows


def tables(case: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    runs = executions(case["neffs"])
    span_s = (runs[-1]["execution_end_ts"] - runs[0]["execution_start_ts"]) / 1e9
    moved = case["read"] + case["write"]
    metadata = {"profile_schema_version": case.get("version", "7.4.0"), "ntff_version": 6, "num_physical_cores": 2,
                "vnc_enabled": True, "first_hw_timestamp": 0, "last_hw_timestamp": runs[-1]["execution_end_ts"],
                "first_ts": "2026-11-30 12:00:00+00:00", "last_ts": "2026-11-30 12:00:00+00:00",
                "dma_ddr_bandwidth": 400e9, "num_dma_engines_per_neuroncore": 16, "hbm_ddr_bandwidth": HBM_STACK,
                "tensor_engine_num_rows": 128, "tensor_engine_num_cols": 128, "tensor_engine_clock_freq": 2.4,
                "vector_engine_clock_freq": 0.96, "vector_engine_num_channels": 128, "scalar_engine_clock_freq": 1.4,
                "scalar_engine_num_channels": 128, "gpsimd_engine_clock_freq": 1.4, "gpsimd_engine_num_channels": 8,
                "neuroncore_clock_freq": 1.4, "ticks_per_nanosec": 1, "instance_type": "trn2.3xlarge",
                "runtime_version": "2.29.40", "driver_version": "2.25.4", "explorer_version": "2.31.0",
                "compiler_version": "2.22.12471.0", "neuroncore_idx": 0}
    summary = {"total_time": span_s, "total_active_time": case["active"],
               "total_active_time_percent": case["active"] / span_s, "model_flops": 0, "hardware_flops": 0,
               "peak_flops_bandwidth_ratio": 79e12 / HBM_STACK, "dma_transfer_count": 6 * len(runs),
               "hbm_read_bytes": case["read"], "hbm_write_bytes": case["write"], "spill_save_bytes": 0,
               "spill_reload_bytes": 0, "mbu_estimated_percent": moved / span_s / HBM_STACK,
               "mbu_min_read_util_percent": case["read"] / 3 / span_s / HBM_STACK, "mfu_estimated_percent": 0.0,
               "hfu_estimated_percent": 0.0, "tensor_engine_active_time_percent": 0.0,
               "tensor_engine_instruction_count": 0, "vector_engine_active_time": case["active"] * 0.5,
               "vector_engine_active_time_percent": 0.125, "vector_engine_instruction_count": 4 * len(runs),
               "scalar_engine_active_time_percent": 0.0625, "scalar_engine_instruction_count": 2 * len(runs),
               "sync_engine_active_time_percent": 0.25}
    return {"Metadata": [metadata], "Summary": [summary], "ExecutionInfo": runs, "SystemProfileEvents": events(runs)}


def write(path: Path, fields: list[tuple[str, str, str, bool]], rows: list[dict[str, Any]]) -> None:
    schema = pa.schema([pa.field(name, TYPES[kind][0], nullable=not required) for name, kind, _, required in fields])
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path)


def schema_fields() -> list[dict[str, Any]]:
    rows = []
    for table, (description, fields) in SCHEMA.items():
        for name, kind, unit, required in fields:
            _, field_type, field_format = TYPES[kind]
            rows.append({"table_name": table, "table_description": description, "field_name": name,
                         "field_description": f"{table}.{name} (see the schema reference)", "field_type": field_type,
                         "field_required": required, "field_format": field_format, "field_unit": unit or None})
    return rows


def main() -> None:
    for name, case in CASES.items():
        folder = HERE / name
        folder.mkdir(exist_ok=True)
        for old in folder.glob("*.parquet"):
            old.unlink()
        for table, rows in tables(case).items():
            fields = SCHEMA[table][1]
            if table == "ExecutionInfo" and case.get("split"):  # a split table, as the docs say large ones are
                write(folder / f"{table}_0.parquet", fields, rows[:5])
                write(folder / f"{table}_1.parquet", fields, rows[5:])
            else:
                write(folder / f"{table}.parquet", fields, rows)
        write(folder / "SchemaFields.parquet", SCHEMA_FIELDS, schema_fields())


if __name__ == "__main__":
    main()
