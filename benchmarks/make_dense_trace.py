"""Make an event-dense synthetic Kineto trace: many small events, few bytes each.

    .venv/bin/python benchmarks/make_dense_trace.py --events 4000000 --per-step 4 --out /tmp/dense.json

Each step is one ``user_annotation`` region (``step_<i>``) holding ``(per_step - 1) // 3`` launches:
an ``aten::mm`` CPU op with ``Input Dims``, its ``cudaLaunchKernel`` and the kernel it launched
(three events each, linked by ``correlation`` and ``External id``). ``--per-step 4`` is the worst
case for region bookkeeping (one region per four events); a decode step of a real model holds
hundreds of launches (``--per-step 601`` is one region and 200 launches). The output stays out of
the repository.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=4_000_000)
    ap.add_argument("--per-step", type=int, default=4, help="events per step: 1 region + 3 per launch")
    ap.add_argument("--out", type=Path, default=Path("/tmp/dense.json"))
    a = ap.parse_args()
    launches = max(1, (a.per_step - 1) // 3)
    steps = max(1, a.events // (1 + 3 * launches))
    tmp = a.out.with_name(a.out.name + ".part")
    n = 0
    with open(tmp, "w") as fh:
        fh.write('{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", ')
        fh.write('"totalGlobalMem": 85000000000, "numSms": 132}],\n"traceEvents": [\n')
        ts = 1000
        corr = 1
        parts: list[str] = []
        for s in range(steps):
            span = 10 * launches + 2
            parts.append(
                f'{{"ph":"X","cat":"user_annotation","name":"step_{s}","pid":1,"tid":1,"ts":{ts},"dur":{span}}}'
            )
            t = ts + 1
            for _ in range(launches):
                parts.append(
                    f'{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":{t},"dur":8,'
                    f'"args":{{"External id":{corr},"Input Dims":[[64,64],[64,64]],'
                    f'"Input type":["float","float"]}}}}'
                )
                parts.append(
                    f'{{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":{t + 2},'
                    f'"dur":4,"args":{{"correlation":{corr},"External id":{corr}}}}}'
                )
                parts.append(
                    f'{{"ph":"X","cat":"kernel","name":"gemm_kernel","pid":0,"tid":7,"ts":{t + 5},"dur":3,'
                    f'"args":{{"device":0,"stream":7,"correlation":{corr},"External id":{corr}}}}}'
                )
                corr += 1
                t += 10
            ts += span + 2
            n += 1 + 3 * launches
            if len(parts) >= 30_000:
                fh.write(",\n".join(parts) + ",\n")
                parts = []
        parts.append('{"ph":"i","cat":"cpu_instant_event","name":"end","pid":1,"tid":1,"ts":%d,"s":"t"}' % ts)
        fh.write(",\n".join(parts) + "\n]}\n")
    tmp.replace(a.out)
    print(f"{a.out}: {a.out.stat().st_size / 1e6:.1f} MB, {n + 1} events, {steps} steps")


if __name__ == "__main__":
    main()
