"""Interconnects for moving a KV cache between a prefill and a decode worker (the what-if,
docs/whatif.md). ``gbps`` = peak bandwidth in 1e9 bytes/s **per direction** (a transfer goes one
way), from the public specification named in ``source``. Peak figures: a real transfer reaches
less, so a transfer time computed from them is a lower bound (``--link-efficiency`` scales them).
"""

from __future__ import annotations

from typing import Any, Final

from tracekit.errors import UsageError

LINKS: Final[dict[str, dict[str, Any]]] = {
    "nvlink5": {
        "name": "NVLink 5 (B200, 18 links)",
        "gbps": 900.0,
        "source": "NVIDIA Blackwell / DGX B200 datasheet: 1.8 TB/s NVLink bandwidth per GPU, both directions "
        "together (nvidia.com/en-us/data-center/dgx-b200) → 900 GB/s each way",
    },
    "nvlink4": {
        "name": "NVLink 4 (H100/H200 SXM, 18 links)",
        "gbps": 450.0,
        "source": "NVIDIA H100 datasheet: NVLink 900 GB/s per GPU, both directions together "
        "(nvidia.com/en-us/data-center/h100) → 450 GB/s each way",
    },
    "nvlink3": {
        "name": "NVLink 3 (A100 SXM, 12 links)",
        "gbps": 300.0,
        "source": "NVIDIA A100 datasheet: NVLink 600 GB/s per GPU, both directions together "
        "(nvidia.com/en-us/data-center/a100) → 300 GB/s each way",
    },
    "pcie5": {
        "name": "PCIe 5.0 x16",
        "gbps": 63.0,
        "source": "PCI-SIG PCIe 5.0 base specification: 32 GT/s per lane, 128b/130b encoding → "
        "32 × 16 × 128/130 / 8 = 63.0 GB/s each way for x16 (pcisig.com)",
    },
    "pcie4": {
        "name": "PCIe 4.0 x16",
        "gbps": 31.5,
        "source": "PCI-SIG PCIe 4.0 base specification: 16 GT/s per lane, 128b/130b encoding → "
        "16 × 16 × 128/130 / 8 = 31.5 GB/s each way for x16 (pcisig.com)",
    },
    "ib-ndr": {
        "name": "InfiniBand NDR (400 Gb/s port)",
        "gbps": 50.0,
        "source": "NVIDIA ConnectX-7 / Quantum-2 NDR product brief: 400 Gb/s per port "
        "(nvidia.com/en-us/networking/infiniband-adapters) → 50 GB/s each way",
    },
    "ib-hdr": {
        "name": "InfiniBand HDR (200 Gb/s port)",
        "gbps": 25.0,
        "source": "NVIDIA ConnectX-6 / Quantum HDR product brief: 200 Gb/s per port "
        "(nvidia.com/en-us/networking/infiniband-adapters) → 25 GB/s each way",
    },
}


def link(key: str) -> dict[str, Any]:
    """The table entry ``key`` (case-insensitive) with its key; UsageError naming the known ones."""
    k = key.strip().lower()
    if k not in LINKS:
        raise UsageError(f"unknown link {key!r}; known: {', '.join(LINKS)} (or give --link-gbps)")
    return {"key": k, **LINKS[k]}
