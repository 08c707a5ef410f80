"""AMD GPUs through ROCm: import only (a ROCm build of torch profiles through the CUDA backend).

Kineto writes ROCm traces with the same GPU categories as CUDA ones; the runtime calls
(``hip*``) and the device names tell them apart.
"""

from __future__ import annotations

from reportgen.devices.lanes import KINETO_GPU_DEVICE_CATEGORIES, KINETO_GPU_WORK_CATEGORIES, LaneRules
from reportgen.devices.spec import Device, TraceEvidence
from reportgen.model.run import DeviceKind

DEVICE = Device(
    kind=DeviceKind.ROCM,
    title="AMD GPU (ROCm)",
    lanes=LaneRules(device_categories=KINETO_GPU_DEVICE_CATEGORIES,
                    device_work_categories=KINETO_GPU_WORK_CATEGORIES),
    evidence=TraceEvidence(runtime_name_prefixes=("hip",), device_name_contains=("amd", "radeon", "instinct")),
    evidence_rank=30,
)
