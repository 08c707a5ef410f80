"""Meta's MTIA accelerators: import only (reportgen cannot profile on MTIA; nothing here has run on one).

Kineto writes MTIA device work as ``mtia_ccp_events`` and its runtime calls as ``mtia_runtime``
(``mtiaLaunchKernel`` ...), linked by correlation ids as CUDA's are. A trace with either is an
MTIA trace, so its device is named, its op table uses the device lane, and its page does not say
"this run's device is the CPU".
"""

from __future__ import annotations

from reportgen.devices.lanes import LaneRules
from reportgen.devices.spec import Device, TraceEvidence
from reportgen.model.run import DeviceKind

MTIA_DEVICE_CATEGORIES = frozenset({"mtia_ccp_events"})

DEVICE = Device(
    kind=DeviceKind.MTIA,
    title="MTIA",
    lanes=LaneRules(device_categories=MTIA_DEVICE_CATEGORIES, device_work_categories=MTIA_DEVICE_CATEGORIES,
                    runtime_categories=frozenset({"mtia_runtime"})),
    evidence=TraceEvidence(category_prefixes=("mtia",), runtime_name_prefixes=("mtia",)),
    evidence_rank=25,
)
