"""The run-bundle data model: frozen dataclasses, units in field names, enums for kinds.

Everything after profiling (build, compare, import, publish) works on these types only.
Times are microseconds (``*_us``), sizes bytes (``*_bytes``), rates per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum

from reportgen.model.breakdown import TraceBreakdown
from reportgen.model.memory import VariantMemory

SCHEMA_VERSION = 6
"""Version of ``run.json``. Bump on any incompatible change and add the step to ``reportgen.model.migrations``:
the loader upgrades older bundles in memory and refuses newer ones. 2: device-specific environment
fields moved into ``Environment.device_extras``. 3: shape sweeps (``Run.sweep``) and the ceilings they
need (``DevicePeak.bandwidth_curve``, ``cache_levels``, ``flops_source``); a reader of version 2 would
silently drop them, so it must refuse these bundles. 5: memory per call (``VariantResult.memory``).
6: an A/B pair's session orders and their seed (``AbInfo.order_seed``, ``AbInfo.orders``), its sessions' wall
times (``AbInfo.session_s``) and whether it calibrates the runner (``AbInfo.calibration``)."""


class DeviceKind(str, Enum):
    """Where a run executed: the names of the devices in ``reportgen.devices`` (one module each)."""

    CPU = "cpu"
    CUDA = "cuda"
    ROCM = "rocm"
    NEURON = "neuron"
    MTIA = "mtia"
    UNKNOWN = "unknown"


class VariantStatus(str, Enum):
    """Outcome of one variant: ran and matched the reference, ran but was wrong, or failed."""

    OK = "ok"
    INCORRECT = "incorrect"
    FAILED = "failed"


class RunSource(str, Enum):
    """How a bundle came to be: profiled by reportgen, or imported from an existing trace."""

    PROFILE = "profile"
    IMPORT = "import"


class TimeBasis(str, Enum):
    """Which clock an op table's "device time" is: a real device lane, or the CPU itself."""

    DEVICE = "device"
    CPU = "cpu"


@dataclass(frozen=True)
class OpRow:
    """One row of ``key_averages()``: totals over all profiled steps."""

    name: str
    calls: int
    self_cpu_us: float
    total_cpu_us: float
    self_device_us: float
    total_device_us: float
    input_shapes: str = ""


@dataclass(frozen=True)
class Correctness:
    """Comparison of a variant's output with the scenario's reference."""

    passed: bool
    max_abs_error: float | None  # None when not comparable (wrong shape, non-finite output)
    max_rel_error: float | None
    atol: float
    rtol: float


@dataclass(frozen=True)
class Artifact:
    """A file stored in the bundle beside ``run.json`` (trace, .neff, .ntff, .pb ...)."""

    path: str
    kind: str
    size_bytes: int


@dataclass(frozen=True)
class CompileInfo:
    """What torch.compile made of a compiled variant: graphs and breaks (dynamo), NEFFs and CPU fallbacks (neuron)."""

    graph_count: int  # graphs dynamo compiled for this variant (torch._dynamo.utils.counters, stats.unique_graphs)
    graph_break_count: int
    break_reasons: tuple[str, ...] = ()
    neff_count: int | None = None  # compiled Neuron programs (.neff) the capture kept; None: not a neuron run
    fallback_ops: tuple[str, ...] | None = None  # torch_neuronx.get_fallback_ops(); None: not available
    source: str = ""


DEVICE_TIME_FIELDS = ("execution_time", "total_active_time", "total_time")
"""Where a variant's device time is read from, best first: the sum of ExecutionInfo's execution spans (neuron-explorer's
Parquet; idle gaps between executions excluded), Summary's total_active_time (idle gaps excluded), total_time (included)."""


@dataclass(frozen=True)
class DeviceEvidence:
    """What the device's own profile says about one variant (on neuron: neuron-explorer on the NTFF).

    On neuron, ``summary`` also holds ``execution_count``, ``execution_time`` (s) and ``neff_count`` from the Parquet
    ExecutionInfo table, and ``counters_per_step`` ``executions``: device programs run per call (naive eager: one per
    op; fused and compiled: one) — reportgen/devices/neuron/parquet.py documents them."""

    timing_source: str  # where this variant's times come from, in words
    summary: dict[str, float] = field(default_factory=dict)  # device summary fields, named as the tool names them
    counters_per_step: dict[str, float] = field(default_factory=dict)  # events (and executions) per profiled step
    profiled_steps: int = 0  # the divisor of the per-step figures (0: totals, no steps known)
    tool: str = ""  # the tool and the commands run; "" when none ran
    notes: tuple[str, ...] = ()

    def programs_per_call(self) -> float | None:
        """Device programs (NEFF executions) per profiled call, from ExecutionInfo: the fusion evidence on the device."""
        return self.counters_per_step.get("executions")

    def hbm_bytes_per_step(self) -> float | None:
        """HBM bytes read + written per profiled step (hbm_read_bytes + hbm_write_bytes over the steps)."""
        if "hbm_read_bytes" not in self.summary or "hbm_write_bytes" not in self.summary:
            return None
        return (self.summary["hbm_read_bytes"] + self.summary["hbm_write_bytes"]) / max(self.profiled_steps, 1)

    def device_time_field(self) -> str | None:
        """The summary field device time is read from: the first of DEVICE_TIME_FIELDS the summary has."""
        return next((f for f in DEVICE_TIME_FIELDS if f in self.summary), None)

    def device_time_us_per_step(self) -> float | None:
        """neuron-explorer's device time per profiled step, in µs (``device_time_field``; total_time is an upper
        bound: the NTFF's idle gaps count)."""
        field_name = self.device_time_field()
        return self.summary[field_name] * 1e6 / max(self.profiled_steps, 1) if field_name else None

    def traffic_ratio(self, minimum_bytes: int) -> float | None:
        """Bytes the device moved per step over the minimum the scenario must move per call (1.0: no extra)."""
        moved = self.hbm_bytes_per_step()
        return moved / minimum_bytes if moved is not None and minimum_bytes > 0 else None

    def floor_us(self, bytes_per_s: float | None) -> float | None:
        """The time the measured traffic takes at the ceiling bandwidth, in µs per step."""
        moved = self.hbm_bytes_per_step()
        return moved / bytes_per_s * 1e6 if moved is not None and bytes_per_s else None


@dataclass(frozen=True)
class VariantResult:
    """Everything measured for one variant of a scenario."""

    name: str
    status: VariantStatus
    description: str = ""
    error: str | None = None
    first_call_us: float | None = None
    compile_time_us: float | None = None
    samples_us: tuple[float, ...] = ()
    calls_per_sample: int = 1
    correctness: Correctness | None = None
    ops: tuple[OpRow, ...] = ()
    time_basis: TimeBasis = TimeBasis.CPU
    profiled_steps: int = 0
    op_dispatch_count: int | None = None  # top-level ATen ops per step (calls user code made into ATen)
    device_event_count: int | None = None  # kernels/copies per step; None when no device lane was traced
    aten_op_count: int | None = None  # all ATen ops per step, nested included (shows composites)
    bytes_per_call: int = 0
    flops_per_call: int = 0
    trace_path: str | None = None
    artifacts: tuple[Artifact, ...] = ()
    compile_info: CompileInfo | None = None  # compiled variants only
    device_evidence: DeviceEvidence | None = None  # the device's own profile (neuron-explorer), where there is one
    breakdown: TraceBreakdown | None = None  # kernels, steps, idle of its trace (an import; a profile with a device lane)
    memory: VariantMemory | None = None  # one call's memory, measured outside the timed samples (schema 5)


@dataclass(frozen=True)
class Environment:
    """The software and hardware fingerprint a run was measured on."""

    hostname: str
    platform: str
    python_version: str
    cpu_model: str
    cpu_count: int
    torch_version: str | None = None
    torch_threads: int | None = None
    device_name: str | None = None
    load_average_1m: float | None = None  # host load when profiling began: other work skews timings
    allocator_env: dict[str, str] | None = None
    """Allocator settings in the measuring process's environment (``MALLOC_*``, ``LD_PRELOAD`` ...); empty: none set;
    None: not recorded (runs written by versions without this field)."""
    machine: str | None = None  # the user's name for the machine (--machine): history and comparisons key on it
    device_extras: dict[str, str] = field(default_factory=dict)
    """Device-specific facts (``cuda_version``, ``neuronx_cc_version`` ...): each device module declares its own."""

    def field_text(self, name: str) -> str | None:
        """A common field or a device extra by name, as text (None when the run has neither)."""
        if name in self.device_extras:
            return self.device_extras[name]
        common = {f.name for f in fields(self)} - {"device_extras"}
        value = getattr(self, name) if name in common else None
        return None if value is None else str(value)


@dataclass(frozen=True)
class BandwidthPoint:
    """Copy bandwidth measured with one working set (source + destination bytes) at profile time."""

    working_set_bytes: int
    bandwidth_bytes_per_s: float


@dataclass(frozen=True)
class CacheLevel:
    """One data cache level of the host CPU as the OS reports it (``L1d``, ``L2``, ``L3``)."""

    name: str
    size_bytes: int


@dataclass(frozen=True)
class DevicePeak:
    """The roofline ceilings for the device, and where each figure came from."""

    bandwidth_bytes_per_s: float | None
    flops_per_s: float | None
    source: str
    bandwidth_curve: tuple[BandwidthPoint, ...] = ()
    """Copy bandwidth across working-set sizes, smallest first (CPU: cache-resident to DRAM); empty: one figure."""
    cache_levels: tuple[CacheLevel, ...] = ()
    flops_source: str = ""
    """Where ``flops_per_s`` comes from: ``measured: ...`` or ``vendor: ...``; empty when there is none."""


@dataclass(frozen=True)
class GitInfo:
    """The source tree a run was made from (None when not in a git checkout)."""

    sha: str | None
    dirty: bool | None


@dataclass(frozen=True)
class ScenarioInfo:
    """Which workload ran, with which parameters (shape, dtype, seed ...)."""

    name: str
    description: str
    parameters: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None  # the variant speedups are measured against; None: the first timed variant


@dataclass(frozen=True)
class MeasureSettings:
    """How timing and profiling were done, so every figure says what produced it."""

    warmup_iters: int
    samples: int
    calls_per_sample: int  # as requested; 0: calibrated per variant (see VariantResult.calls_per_sample)
    profile_wait: int
    profile_warmup: int
    profile_active: int
    cache_flush_bytes: int = 0
    """Bytes written to flush the device cache before each timed call (CUDA: the L2); 0: no flush."""
    timing_rounds: int = 0
    """Interleaved rounds the samples were taken in (a block of every variant per round); 0: one block each."""


@dataclass(frozen=True)
class AbRoundSamples:
    """One variant's block of per-call timing samples in one A/B round."""

    variant: str
    samples_us: tuple[float, ...]


@dataclass(frozen=True)
class AbRound:
    """One interleaved round of an A/B pair, as this side measured it; ``first_side`` ran first (ABBA order).
    ``session``: the pair of worker processes it ran in (schema 4; earlier pairs had one, 0); ``index`` counts the
    rounds inside the session."""

    index: int
    first_side: str
    samples: tuple[AbRoundSamples, ...]
    session: int = 0


@dataclass(frozen=True)
class SessionOrder:
    """Who goes first in one session of an A/B pair: ``spawned_first`` is started, sent ``load`` and (session 1)
    warmed first; ``opens`` times the first block of round 0 (ABBA alternates from there) and the second block of the
    priming round before it, so that it runs round 0's first block right after its own."""

    session: int
    spawned_first: str
    opens: str

    @property
    def spawn_sides(self) -> tuple[str, str]:
        """Both sides ("base", "head"), the one started first first."""
        return (self.spawned_first, "head" if self.spawned_first == "base" else "base")


@dataclass(frozen=True)
class AbInfo:
    """Marks a run as one side ("base" or "head") of an interleaved A/B pair (``reportgen ab``)."""

    pair_id: str
    side: str
    partner_run_id: str
    method: str
    threshold_pct: float
    rounds: tuple[AbRound, ...]
    order_seed: int | None = None
    """The seed the sessions' orders were drawn from (``reportgen ab --order-seed`` replays them); schema 6."""
    orders: tuple[SessionOrder, ...] = ()
    """Every session's order, as run; schema 6 (older pairs: base started and opened every session)."""
    session_s: tuple[float, ...] = ()
    """Every session's wall time, the first one's with its calibration and compiles; schema 6."""
    calibration: bool = False
    """An A/A pair of the base against itself (``reportgen ab --calibrate``): what this runner's gate can see; schema
    6."""


@dataclass(frozen=True)
class SweepSample:
    """One variant's timing at one point of a shape sweep (no profiler: timing and correctness only)."""

    variant: str
    status: VariantStatus
    samples_us: tuple[float, ...] = ()
    calls_per_sample: int = 1
    correctness_passed: bool | None = None
    error: str | None = None
    memory: VariantMemory | None = None
    """One call's memory at this shape (figures only: no ops, no timeline); schema 5."""


@dataclass(frozen=True)
class SweepPoint:
    """One shape of a sweep: the minimum traffic and work of a call, and each variant's timing."""

    shape: tuple[int, ...]
    bytes_per_call: int
    flops_per_call: int
    samples: tuple[SweepSample, ...] = ()
    params: dict[str, str] = field(default_factory=dict)
    """Scenario parameters this point sets (``--sweep-param``), as recorded in ``ScenarioInfo.parameters``."""
    rounds: int = 0
    """Interleaved rounds the samples were taken in (each round: a block of samples of every variant)."""
    cache_flush_bytes: int = 0
    """Bytes written to flush the device cache before each timed call (one call per sample then); 0: none."""
    error: str | None = None
    """Why the point has no samples (out of memory, make_inputs failed ...); the other points went on."""


@dataclass(frozen=True)
class Run:
    """One run bundle's ``run.json``."""

    schema_version: int
    run_id: str
    created_utc: str
    label: str
    source: RunSource
    reportgen_version: str
    device: DeviceKind
    git: GitInfo
    environment: Environment
    peak: DevicePeak
    scenario: ScenarioInfo
    variants: tuple[VariantResult, ...]
    settings: MeasureSettings | None = None
    notes: tuple[str, ...] = ()
    ab: AbInfo | None = None  # set on both runs of a `reportgen ab` pair
    sweep: tuple[SweepPoint, ...] = ()
    """Shapes measured besides the profiled one (``reportgen profile --sweep``), smallest first; empty: none."""

    def variant(self, name: str) -> VariantResult | None:
        """The variant called ``name``, or None."""
        return next((v for v in self.variants if v.name == name), None)

    @property
    def ok(self) -> bool:
        """True when every variant ran and matched the reference."""
        return all(v.status is VariantStatus.OK for v in self.variants)

