"""A parsed trace's records: ``Trace`` and its duration events (``TraceEvent``), and the lane of an event."""

from __future__ import annotations

from dataclasses import dataclass, field

from reportgen.devices import classify_category
from reportgen.devices.lanes import Lane


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """One duration event (``X``, or a matched ``B``/``E`` pair); times in microseconds."""

    name: str
    category: str
    lane: Lane
    start_us: float
    duration_us: float
    pid: str
    tid: str
    correlation: int | None
    external_id: int | None

    @property
    def end_us(self) -> float:
        """The event's end time."""
        return self.start_us + self.duration_us


@dataclass(frozen=True)
class Trace:
    """A parsed trace: duration events sorted by (start, longest first) and what the file says about itself."""

    source: str
    events: tuple[TraceEvent, ...]
    has_device_lane: bool
    device_kind_hint: str
    base_time_ns: int | None = None
    device_names: tuple[str, ...] = ()
    rank: int | None = None
    world_size: int | None = None
    cuda_runtime_version: int | None = None
    input_shapes: dict[str, str] = field(default_factory=dict)
    """Host op name -> its calls' distinct ``args["Input Dims"]`` (at most MAX_SHAPES_PER_OP, '; '-joined)."""
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    """(pid, tid) -> Kineto's ``thread_name`` metadata (``python3``, ``stream 7``): the timeline's row labels."""
    process_names: dict[str, str] = field(default_factory=dict)
    """pid -> Kineto's ``process_name`` metadata (``python3``, ``GPU 0``)."""


def lane_of(category: str) -> Lane:
    """The timeline lane of a Chrome-trace category (case-insensitive), by the device registry's rules."""
    return classify_category(category)[0]


def is_device_work(event: TraceEvent) -> bool:
    """True for kernels, copies and fills on a device (what device time and kernel counts sum)."""
    return event.lane is Lane.DEVICE and classify_category(event.category)[1]
