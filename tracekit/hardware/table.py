"""Device peaks from public datasheets (docs/hardware.md lists every source and convention).

Units: ``tflops`` = dense (no structured sparsity) peak in 1e12 FLOP/s per dtype; ``gbps`` = peak
DRAM bandwidth in 1e9 bytes/s. ``fp32`` is the peak an fp32 GEMM reaches by default: CUDA-core
FP32 on NVIDIA (PyTorch leaves TF32 off for matmul), the FP32 matrix rate on AMD CDNA.
``names``: regular expressions tried, in table order, against the lower-cased device name with
runs of non-alphanumerics collapsed to one space. ``units`` (SMs / CUs), ``cc`` and
``mem_gib`` (min, max) identify a device whose name is empty or generic.
A plain Python table so it ships inside the package without package-data configuration.
"""

from __future__ import annotations

from typing import Any, Final

_H100_DS: Final = (
    "NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), dense = half the starred sparse figures"
)
_H200_DS: Final = (
    "NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), dense = half the starred sparse figures"
)
_A100_DS: Final = "NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100), dense figures"
_V100_DS: Final = "NVIDIA Tesla V100 GPU datasheet (nvidia.com/en-us/data-center/v100); no bf16 hardware"
_MI300_DS: Final = (
    "AMD Instinct MI300X data sheet / product page (amd.com/en/products/accelerators/instinct/mi300/mi300x.html), "
    "dense figures"
)
_MI250_DS: Final = "AMD Instinct MI250 / MI250X data sheets (amd.com/en/products/accelerators/instinct/mi200)"
# Dense tensor-core peaks (TFLOP/s) of every A100 form factor: the datasheet gives one column.
# Dense tensor-core peaks (TFLOP/s) the H100 and H200 datasheets give for the same form factor.
_HOPPER_NVL_TFLOPS: Final = dict(fp64=30.0, fp32=60.0, tf32=417.5, bf16=835.5, fp16=835.5, fp8=1670.5, int8=1670.5)
_HOPPER_SXM_TFLOPS: Final = dict(fp64=34.0, fp32=67.0, tf32=494.5, bf16=989.5, fp16=989.5, fp8=1979.0, int8=1979.0)
_A100_TFLOPS: Final = {"fp64": 9.7, "fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0, "int8": 624.0}

TABLE: Final[list[dict[str, Any]]] = [
    {
        "key": "h100-nvl",
        "name": "NVIDIA H100 NVL",
        "names": [r"\bh100 nvl\b"],
        "cc": "9.0",
        "tflops": dict(_HOPPER_NVL_TFLOPS),
        "gbps": 3900.0,
        "source": _H100_DS + " (H100 NVL column)",
    },
    {
        "key": "h100-pcie",
        "name": "NVIDIA H100 PCIe 80GB",
        "names": [r"\bh100 pcie\b"],
        "units": 114,
        "cc": "9.0",
        "tflops": {
            "fp64": 26.0,
            "fp32": 51.0,
            "tf32": 378.0,
            "bf16": 756.5,
            "fp16": 756.5,
            "fp8": 1513.0,
            "int8": 1513.0,
        },
        "gbps": 2000.0,
        "source": _H100_DS + " (H100 PCIe column)",
    },
    {
        "key": "h200-nvl",
        "name": "NVIDIA H200 NVL",
        "names": [r"\bh200 nvl\b"],
        "cc": "9.0",
        "tflops": dict(_HOPPER_NVL_TFLOPS),
        "gbps": 4800.0,
        "source": _H200_DS + " (H200 NVL column)",
    },
    {
        "key": "h200",
        "name": "NVIDIA H200 SXM 141GB",
        "names": [r"\bh200\b", r"\bgh200\b"],
        "units": 132,
        "cc": "9.0",
        "mem_gib": [100, 200],
        "tflops": dict(_HOPPER_SXM_TFLOPS),
        "gbps": 4800.0,
        "source": _H200_DS + " (H200 SXM column)",
    },
    {
        "key": "h100-sxm",
        "name": "NVIDIA H100 SXM5 80GB",
        "names": [r"\bh100\b.*\bhbm3\b", r"\bh100 sxm", r"\bh100\b"],
        "units": 132,
        "cc": "9.0",
        "mem_gib": [0, 100],
        "tflops": dict(_HOPPER_SXM_TFLOPS),
        "gbps": 3350.0,
        "source": _H100_DS + " (H100 SXM column); 'NVIDIA H100 80GB HBM3' is the SXM5 board's name",
    },
    {
        "key": "a100-pcie-80gb",
        "name": "NVIDIA A100 PCIe 80GB",
        "names": [r"\ba100\b.*\bpcie\b"],
        "mem_gib": [48, 100],
        "tflops": dict(_A100_TFLOPS),
        "gbps": 1935.0,
        "source": _A100_DS + " (A100 80GB PCIe)",
    },
    {
        "key": "a100-pcie-40gb",
        "name": "NVIDIA A100 PCIe 40GB",
        "names": [r"\ba100\b.*\bpcie\b"],
        "mem_gib": [0, 48],
        "tflops": dict(_A100_TFLOPS),
        "gbps": 1555.0,
        "source": _A100_DS + " (A100 40GB PCIe)",
    },
    {
        "key": "a100-sxm4-80gb",
        "name": "NVIDIA A100 SXM4 80GB",
        "names": [r"\ba100\b"],
        "units": 108,
        "cc": "8.0",
        "mem_gib": [48, 100],
        "tflops": dict(_A100_TFLOPS),
        "gbps": 2039.0,
        "source": _A100_DS + " (A100 80GB SXM)",
    },
    {
        "key": "a100-sxm4-40gb",
        "name": "NVIDIA A100 SXM4 40GB",
        "names": [r"\ba100\b"],
        "units": 108,
        "cc": "8.0",
        "mem_gib": [0, 48],
        "tflops": dict(_A100_TFLOPS),
        "gbps": 1555.0,
        "source": _A100_DS + " (A100 40GB SXM); also 'A100-PG509-200', an SXM4 40GB board SKU",
    },
    {
        "key": "l4",
        "name": "NVIDIA L4",
        "names": [r"\bl4\b"],
        "units": 58,
        "cc": "8.9",
        "tflops": {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0, "fp8": 242.5, "int8": 242.5},
        "gbps": 300.0,
        "source": (
            "NVIDIA L4 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/l4), "
            "dense = half the starred sparse figures"
        ),
    },
    {
        "key": "a10g",
        "name": "NVIDIA A10G",
        "names": [r"\ba10g\b"],
        "cc": "8.6",
        "tflops": {"fp32": 31.5, "tf32": 63.0, "bf16": 126.0, "fp16": 126.0, "int8": 252.0},
        "gbps": 600.0,
        "source": (
            "derived, no public NVIDIA datasheet: 72 SMs x 1.71 GHz boost at the GA102 professional rates of "
            "the A10 datasheet (256 FP32 / 1024 FP16 FLOP per SM per clock); "
            "600 GB/s GDDR6 (AWS EC2 G5 documentation)"
        ),
    },
    {
        "key": "a10",
        "name": "NVIDIA A10",
        "names": [r"\ba10\b"],
        "units": 72,
        "cc": "8.6",
        "tflops": {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0, "int8": 250.0},
        "gbps": 600.0,
        "source": "NVIDIA A10 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/products/a10-gpu), dense figures",
    },
    {
        "key": "v100s-pcie",
        "name": "NVIDIA V100S PCIe 32GB",
        "names": [r"\bv100s\b"],
        "tflops": {"fp64": 8.2, "fp32": 16.4, "fp16": 130.0},
        "gbps": 1134.0,
        "source": _V100_DS + " (V100S PCIe)",
    },
    {
        "key": "v100-pcie",
        "name": "NVIDIA V100 PCIe",
        "names": [r"\bv100\b.*\bpcie\b"],
        "tflops": {"fp64": 7.0, "fp32": 14.0, "fp16": 112.0},
        "gbps": 900.0,
        "source": _V100_DS + " (V100 PCIe, 16 and 32 GB)",
    },
    {
        "key": "v100-sxm2",
        "name": "NVIDIA V100 SXM2",
        "names": [r"\bv100\b"],
        "units": 80,
        "cc": "7.0",
        "tflops": {"fp64": 7.8, "fp32": 15.7, "fp16": 125.0},
        "gbps": 900.0,
        "source": _V100_DS + " (V100 SXM2, 16 and 32 GB: same peaks)",
    },
    {
        "key": "b200",
        "name": "NVIDIA B200",
        "names": [r"\bb200\b"],
        "units": 148,
        "cc": "10.0",
        "tflops": {
            "fp64": 37.0,
            "fp32": 75.0,
            "tf32": 1125.0,
            "bf16": 2250.0,
            "fp16": 2250.0,
            "fp8": 4500.0,
            "int8": 4500.0,
            "fp4": 9000.0,
        },
        "gbps": 8000.0,
        "source": (
            "NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx): 8-GPU totals divided by 8, "
            "sparse tensor figures halved (FP4 144 PFLOPS sparse per 8 GPUs -> 9 dense per GPU); "
            "8 TB/s HBM3e per GPU"
        ),
    },
    {
        "key": "mi355x",
        "name": "AMD Instinct MI355X",
        "names": [r"\bmi355x\b"],
        "units": 256,
        "cc": "9.5",
        "tflops": {
            "fp64": 78.6,
            "fp32": 157.3,
            "bf16": 2516.6,
            "fp16": 2516.6,
            "fp8": 5033.2,
            "int8": 5033.2,
            "fp6": 10066.3,
            "fp4": 10066.3,
        },
        "gbps": 8000.0,
        "source": (
            "AMD Instinct MI355X product page (amd.com/en/products/accelerators/instinct/mi350/mi355x.html), dense "
            "figures: FP8 = 256 CUs x 8,192 FLOP/clock (AMD, ISSCC 2026) x 2.4 GHz = 5.03 PFLOP/s, FP16/BF16 half "
            "of it, MXFP6/MXFP4 twice; 288 GB HBM3E at 8 TB/s"
        ),
    },
    {
        "key": "mi300x",
        "name": "AMD Instinct MI300X",
        "names": [r"\bmi300x\b"],
        "units": 304,
        "cc": "9.4",
        "tflops": {
            "fp64": 81.7,
            "fp32": 163.4,
            "tf32": 653.7,
            "bf16": 1307.4,
            "fp16": 1307.4,
            "fp8": 2614.9,
            "int8": 2614.9,
        },
        "gbps": 5300.0,
        "source": _MI300_DS + "; 'MI300X VF' is its SR-IOV virtual function (same silicon, same peaks)",
    },
    {
        "key": "mi250x-gcd",
        "name": "AMD Instinct MI250X (one GCD)",
        "names": [r"\bmi250x\b"],
        "units": 110,
        "cc": "9.0",
        "tflops": {"fp64": 47.85, "fp32": 47.85, "bf16": 191.5, "fp16": 191.5, "int8": 191.5},
        "gbps": 1638.4,
        "source": _MI250_DS + ": MI250X totals (FP32 matrix 95.7, FP16/BF16 383 TFLOP/s, 3.2768 TB/s) halved, "
        "because each of its two GCDs is a separate device in PyTorch",
    },
    {
        "key": "mi250-gcd",
        "name": "AMD Instinct MI250 (one GCD)",
        "names": [r"\bmi250\b"],
        "units": 104,
        "cc": "9.0",
        "tflops": {"fp64": 45.25, "fp32": 45.25, "bf16": 181.05, "fp16": 181.05, "int8": 181.05},
        "gbps": 1638.4,
        "source": _MI250_DS + ": MI250 totals (FP32 matrix 90.5, FP16/BF16 362.1 TFLOP/s, 3.2768 TB/s) halved, "
        "because each of its two GCDs is a separate device in PyTorch",
    },
    {
        "key": "rtx4090",
        "name": "NVIDIA GeForce RTX 4090",
        "names": [r"\brtx 4090\b"],
        "units": 128,
        "cc": "8.9",
        "tflops": {"fp32": 82.6, "tf32": 82.6, "bf16": 165.2, "fp16": 165.2, "fp8": 330.3, "int8": 660.6},
        "gbps": 1008.0,
        "source": "NVIDIA Ada GPU Architecture whitepaper, RTX 4090 column: dense tensor rates with FP32 accumulate",
    },
    {
        "key": "rtx3090",
        "name": "NVIDIA GeForce RTX 3090",
        "names": [r"\brtx 3090\b"],
        "units": 82,
        "cc": "8.6",
        "tflops": {"fp32": 35.6, "tf32": 35.6, "bf16": 71.0, "fp16": 71.0, "int8": 284.0},
        "gbps": 936.0,
        "source": (
            "NVIDIA Ampere GA102 GPU Architecture whitepaper, RTX 3090 column: dense tensor rates with FP32 accumulate"
        ),
    },
    {
        "key": "quadro-gp100",
        "name": "NVIDIA Quadro GP100",
        "names": [r"\bgp100\b"],
        "units": 56,
        "cc": "6.0",
        "tflops": {"fp64": 5.2, "fp32": 10.3, "fp16": 20.7},
        "gbps": 717.0,
        "source": "NVIDIA Quadro GP100 datasheet (Pascal; no tensor cores, no bf16)",
    },
]
