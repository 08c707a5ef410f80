"""The device registry: one module per device, and the questions the rest of reportgen asks about devices.

A device module (``cpu.py``, ``cuda.py``, ``rocm.py``, ``neuron.py``, ``mtia.py``) declares one ``Device``:
its profiling backend, its trace categories and lane rules, the evidence that a trace was taken
on it, its import folder layout and artifact suffixes, and its environment fields with labels.
Adding a device: write its module, add its ``DeviceKind`` member, and list it in ``DEVICES``.

Importing this package never imports torch: backends import it when they are used.
"""

from __future__ import annotations

from reportgen.devices import cpu, cuda, mtia, rocm
from reportgen.devices.backend import Backend, import_torch
from reportgen.devices.lanes import OTHER_KINETO_RULES, Lane, LaneClassifier
from reportgen.devices.neuron import device as neuron
from reportgen.devices.spec import Device, EnvField, ImportLayout, TraceFacts, TraceHeader
from reportgen.errors import DeviceUnavailable
from reportgen.model.run import DeviceKind, Environment

__all__ = [
    "DEVICES", "Backend", "Device", "EnvField", "Lane", "classify_category", "compared_environment_fields",
    "device_names", "device_hint", "environment_fields", "extra_label", "extras_from_trace", "get",
    "import_layouts", "import_torch", "profile_device_names", "select_backend",
]

DEVICES: tuple[Device, ...] = (cpu.DEVICE, cuda.DEVICE, rocm.DEVICE, neuron.DEVICE, mtia.DEVICE)
"""Every device reportgen knows, in the order ``--device`` lists them."""

_BY_NAME = {d.kind.value: d for d in DEVICES}
_LANES = LaneClassifier([*(d.lanes for d in DEVICES), OTHER_KINETO_RULES])


def get(kind: DeviceKind | str) -> Device | None:
    """The device called ``kind`` (``DeviceKind.UNKNOWN`` and unknown names: None)."""
    return _BY_NAME.get(kind.value if isinstance(kind, DeviceKind) else kind)


def device_names() -> tuple[str, ...]:
    """Every device's name (``reportgen import --device``)."""
    return tuple(d.kind.value for d in DEVICES)


def profile_device_names() -> tuple[str, ...]:
    """The devices that can profile, in the order ``--device auto`` tries them (``reportgen profile --device``)."""
    return tuple(d.kind.value for d in sorted((d for d in DEVICES if d.backend), key=lambda d: d.auto_rank))


# ---------------------------------------------------------------------------------------------
# Profiling


def select_backend(name: str) -> Backend:
    """The backend called ``name``, checked to be usable; ``auto`` picks the best one present."""
    if name != "auto":
        device = get(name)
        if device is None or device.backend is None:
            raise DeviceUnavailable(f"device {name!r} cannot profile; profiling devices: "
                                    f"{', '.join(profile_device_names())}")
        backend = device.backend()
        backend.check_available()
        return backend
    import_torch()
    for candidate in profile_device_names():
        factory = _BY_NAME[candidate].backend
        assert factory is not None
        backend = factory()
        try:
            backend.check_available()
        except DeviceUnavailable:
            continue
        return backend
    raise DeviceUnavailable("no usable device found")  # unreachable: the CPU is always there


# ---------------------------------------------------------------------------------------------
# Traces


def classify_category(category: str) -> tuple[Lane, bool]:
    """The timeline lane of a Chrome-trace category (case-insensitive), and whether it is device work."""
    return _LANES.classify(category)


def device_hint(facts: TraceFacts) -> str:
    """Where a trace was taken (a device name, or 'unknown'), from the first device whose evidence it shows."""
    for device in sorted(DEVICES, key=lambda d: d.evidence_rank):
        if device.evidence is not None and device.evidence.matches(facts):
            return device.kind.value
    return DeviceKind.UNKNOWN.value


def extras_from_trace(trace: TraceHeader) -> dict[str, str]:
    """The device extras every device finds in an imported trace's metadata."""
    out: dict[str, str] = {}
    for device in DEVICES:
        out.update(device.extras_from_trace(trace))
    return out


def import_layouts() -> tuple[tuple[Device, ImportLayout], ...]:
    """The devices whose profiler writes a folder layout ``reportgen import`` recognises."""
    return tuple((d, d.import_layout) for d in DEVICES if d.import_layout is not None)


# ---------------------------------------------------------------------------------------------
# Environment


def environment_fields() -> tuple[EnvField, ...]:
    """Every device's environment fields, in registry order (a name two devices share is listed once)."""
    seen: dict[str, EnvField] = {}
    for device in DEVICES:
        for f in device.environment_fields:
            seen.setdefault(f.name, f)
    return tuple(seen.values())


def compared_environment_fields() -> tuple[str, ...]:
    """Device extras whose difference ``reportgen compare`` warns about."""
    return tuple(f.name for f in environment_fields() if f.compared)


def extra_label(name: str) -> str:
    """The display label of a device extra (its name when no device declares it)."""
    return next((f.label for f in environment_fields() if f.name == name), name)


def labelled_extras(env: Environment, declared_only: bool = False) -> tuple[tuple[str, str], ...]:
    """(label, value) of each device extra of ``env``, in the order the registry declares them, for display.

    ``declared_only``: just the extras a device declares as environment fields (versions, driver), as the
    report's software line shows them; the others are in ``undeclared_extras``.
    """
    order = {f.name: i for i, f in enumerate(environment_fields())}
    names = sorted((n for n in env.device_extras if not declared_only or n in order),
                   key=lambda n: (order.get(n, len(order)), n))
    return tuple((extra_label(n), env.device_extras[n]) for n in names)


def undeclared_extras(env: Environment) -> dict[str, str]:
    """The device extras of ``env`` no device declares as an environment field (instance, LNC, settings, warnings).

    The report's device evidence section lists them by name.
    """
    declared = {f.name for f in environment_fields()}
    return {n: v for n, v in env.device_extras.items() if n not in declared}
