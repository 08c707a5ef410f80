"""The run-bundle data model: frozen dataclasses, units in field names, enums for kinds.

Everything after profiling (build, compare, import, publish) works on these types only.
Times are microseconds (``*_us``), sizes bytes (``*_bytes``), rates per second.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import Enum

SCHEMA_VERSION = 2
"""Version of ``run.json``. Bump on any incompatible change and add the step to ``reportgen.migrations``:
the loader upgrades older bundles in memory and refuses newer ones. 2: device-specific environment
fields moved into ``Environment.device_extras``."""


class DeviceKind(str, Enum):
    """Where a run executed: the names of the devices in ``reportgen.devices`` (one module each)."""

    CPU = "cpu"
    CUDA = "cuda"
    ROCM = "rocm"
    NEURON = "neuron"
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

    def labelled_extras(self) -> tuple[tuple[str, str], ...]:
        """(label, value) of each device extra, in the order the device registry declares them, for display."""
        from reportgen.devices import environment_fields, extra_label  # the registry imports this module

        order = {f.name: i for i, f in enumerate(environment_fields())}
        names = sorted(self.device_extras, key=lambda n: (order.get(n, len(order)), n))
        return tuple((extra_label(n), self.device_extras[n]) for n in names)


@dataclass(frozen=True)
class DevicePeak:
    """The roofline ceilings for the device, and where each figure came from."""

    bandwidth_bytes_per_s: float | None
    flops_per_s: float | None
    source: str


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

    def variant(self, name: str) -> VariantResult | None:
        """The variant called ``name``, or None."""
        return next((v for v in self.variants if v.name == name), None)

    @property
    def ok(self) -> bool:
        """True when every variant ran and matched the reference."""
        return all(v.status is VariantStatus.OK for v in self.variants)
