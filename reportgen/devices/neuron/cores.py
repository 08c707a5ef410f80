"""Which NeuronCores a process may take, and how ``reportgen ab`` gives each worker its own.

The Neuron Runtime reserves every NeuronCore it initialises for the process that initialised it ("Once a
NeuronCore is reserved for a process, it cannot be used by another process at all", Neuron Runtime
configuration guide), so the two workers of an A/B pair must see disjoint cores. ``NEURON_RT_VISIBLE_CORES``
takes "a single NeuronCore index or an integer range" (``3``, ``1-3``); the comma list ``0,2-3`` is read too.
Pure: the environment and the core count come in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping

from reportgen.errors import DeviceUnavailable, UsageError

VISIBLE_CORES_ENV = "NEURON_RT_VISIBLE_CORES"
NUM_CORES_ENV = "NEURON_RT_NUM_CORES"
MAX_CORE_INDEX = 4095
"""No Neuron instance has this many cores; a larger index is a typing error, refused before a range is expanded."""


def parse_core_list(text: str) -> tuple[int, ...]:
    """``"0,2-3"`` -> ``(0, 2, 3)``: the cores a ``NEURON_RT_VISIBLE_CORES`` value names, sorted, each once."""
    cores: set[int] = set()
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        first, last = _index(low, text), _index(high, text) if sep else _index(low, text)
        if last < first:
            raise UsageError(f"${VISIBLE_CORES_ENV}={text!r}: the range {part.strip()!r} runs backwards; "
                             "write it low-high, e.g. 0-3")
        cores.update(range(first, last + 1))
    return tuple(sorted(cores))


def _index(token: str, text: str) -> int:
    token = token.strip()
    if not token.isascii() or not token.isdigit() or int(token) > MAX_CORE_INDEX:
        raise UsageError(f"${VISIBLE_CORES_ENV}={text!r}: expected core indices and ranges such as 0-1 or 0,2-3")
    return int(token)


def ab_core_pair(environ: Mapping[str, str], cores_total: int | None) -> tuple[int, int]:
    """Two cores for the two workers of ``ab``: the first two of ``NEURON_RT_VISIBLE_CORES`` where it is set, else
    cores 0 and 1 of a machine whose tools report ``cores_total`` (logical) cores. Fewer than two is a refusal."""
    visible = environ.get(VISIBLE_CORES_ENV, "").strip()
    if visible:
        cores = parse_core_list(visible)
        if len(cores) < 2:
            raise DeviceUnavailable(f"device neuron: ab needs two NeuronCores, one per side (a process owns every core "
                                    f"it initialises), but ${VISIBLE_CORES_ENV}={visible} gives one; make two visible, "
                                    "e.g. NEURON_RT_VISIBLE_CORES=0-1", field="device")
        return cores[0], cores[1]
    if cores_total is None:
        raise DeviceUnavailable("device neuron: ab needs two NeuronCores, one per side, and neither neuron-ls nor "
                                f"neuron-monitor reported how many this machine has; set ${VISIBLE_CORES_ENV} to two "
                                "cores, e.g. NEURON_RT_VISIBLE_CORES=0-1", field="device")
    if cores_total < 2:
        raise DeviceUnavailable(f"device neuron: ab needs two NeuronCores, one per side (a process owns every core it "
                                f"initialises); this machine reports {cores_total}", field="device")
    return 0, 1


def side_environment(environ: Mapping[str, str], core: int) -> dict[str, str]:
    """``environ`` for a worker that may take only ``core``: ``NEURON_RT_NUM_CORES`` is dropped (it would ask the
    runtime for a count of its own choosing)."""
    env = {k: v for k, v in environ.items() if k != NUM_CORES_ENV}
    env[VISIBLE_CORES_ENV] = str(core)
    return env
