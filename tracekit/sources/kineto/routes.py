"""Which Kineto events go to which canonical table, and the columns each table takes from them:
the category maps (old ≤ 2021 names included), the (ph, cat) routing, :data:`TABLE_SPECS` (the
``args`` fields per table, shared by both builders) and the native scanner's routes and columns.
Used by :mod:`tracekit.sources.kineto.tables` and by the loader, which hands them to the scanner.
"""

from __future__ import annotations

from tracekit.tables import kind_values as kinds

# Category → table. Old (≤ 2021) names map to the same tables.
KERNEL_CATS = {
    "kernel": kinds.KIND_KERNEL,
    "Kernel": kinds.KIND_KERNEL,
    "gpu_memcpy": kinds.KIND_MEMCPY,
    "Memcpy": kinds.KIND_MEMCPY,
    "gpu_memset": kinds.KIND_MEMSET,
    "Memset": kinds.KIND_MEMSET,
}
LAUNCH_CATS = {"cuda_runtime": "runtime", "Runtime": "runtime", "cuda_driver": "driver", "Driver": "driver"}
OP_CATS = {"cpu_op": "cpu_op", "Operator": "cpu_op"}
REGION_CATS = {
    "user_annotation": kinds.REGION_USER,
    "User": kinds.REGION_USER,
    "gpu_user_annotation": kinds.REGION_GPU_USER,
}
FLOW_CATS = {"ac2g", "async_cpu_to_gpu", "fwdbwd"}
# Flows that link a CPU launch to its device activity; their id is the launch correlation.
LAUNCH_FLOW_CATS = {"ac2g", "async_cpu_to_gpu"}
_ROUTE: dict[str, int] = {
    **{c: 0 for c in KERNEL_CATS},
    **{c: 1 for c in LAUNCH_CATS},
    **{c: 2 for c in OP_CATS},
    **{c: 3 for c in REGION_CATS},
}
TABLE_NAMES = ("kernels", "launches", "ops", "regions")
FLOW, META, MEMORY = 4, 5, 6
# Instant ("i") events by category: torch.profiler's ``[memory]`` events (profile_memory=True)
# go to the optional ``memory`` table (only those named MEMORY_EVENT; counted as skipped too,
# as flows and metadata are, so the parse statistics do not depend on the table).
INSTANT_ROUTES: dict[str, int] = {"cpu_instant_event": MEMORY}
MEMORY_EVENT = "[memory]"
# (ph, cat) → table index, FLOW or MEMORY; other "M" events are META, everything else unrouted.
ROUTE_PH_CAT: dict[tuple[str | None, str | None], int] = {
    **{("X", c): i for c, i in _ROUTE.items()},
    **{(p, c): FLOW for c in FLOW_CATS for p in "sft"},
    **{("i", c): g for c, g in INSTANT_ROUTES.items()},
}
# The memory table's columns from the ``args`` of a [memory] event: (column, attribute of the
# msgspec ``Args`` struct); the native scanner's field has the column's name.
MEMORY_ARGS = (
    ("mem_bytes", "mem_bytes"),  # "Bytes": + allocated, − freed (the table's bytes)
    ("total_allocated", "total_allocated"),
    ("total_reserved", "total_reserved"),
    ("addr", "addr"),
    ("device_type", "device_type"),
    ("device_id", "device_id"),
)
# Each table's columns after name/pid/tid/ts/dur, for both builders: (column, kind, attribute
# of the msgspec ``Args`` struct). The native scanner's field is the column without its leading
# "_" (kineto_native.STR_FIELDS / INT_FIELDS). Kinds: "cat" the event's category, "int" an
# integer (coercions counted), "raw" JSON text, "strlist" a list of strings.
TABLE_SPECS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "kernels": (
        ("_cat", "cat", ""),
        ("correlation", "int", "correlation"),
        ("external_id", "int", "external_id"),
        ("device", "int", "device"),
        ("stream", "int", "stream"),
        ("registers_per_thread", "int", "registers"),
        ("shared_memory", "int", "shared_memory"),
        ("bytes", "int", "nbytes"),
        ("graph_id", "int", "graph_id"),
        ("graph_node_id", "int", "graph_node_id"),
        ("_grid", "raw", "grid"),
        ("_block", "raw", "block"),
        ("_comm_nelems", "int", "comm_nelems"),
        ("_comm_dtype", "raw", "comm_dtype"),
    ),
    "launches": (("_cat", "cat", ""), ("correlation", "int", "correlation"), ("external_id", "int", "external_id")),
    "ops": (
        ("external_id", "int", "external_id"),
        ("sequence_number", "int", "seq"),
        ("input_dims", "raw", "input_dims"),
        ("input_strides", "raw", "input_strides"),
        ("input_types", "strlist", "input_types"),
        ("concrete_inputs", "strlist", "concrete"),
    ),
    "regions": (
        ("_cat", "cat", ""),
        ("external_id", "int", "external_id"),
        ("_device", "int", "device"),
        ("_stream", "int", "stream"),
    ),
}
_COMMON_FIELDS = ("name", "pid", "tid", "ts_ns", "dur_ns")
# Fields the native scanner builds per group (the four tables, flows, metadata, memory).
NATIVE_COLUMNS = (
    *((*_COMMON_FIELDS, *(c.lstrip("_") for c, _, _ in TABLE_SPECS[t]), "_ev") for t in TABLE_NAMES),
    ("cat", "ph", "id"),
    ("name", "pid", "tid", "arg_name", "_ev"),
    ("name", "pid", "tid", "ts_ns", *(c for c, _ in MEMORY_ARGS), "_ev"),
)
X_ROUTES = _ROUTE
