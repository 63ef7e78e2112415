"""Communication time per phase and how much of it is exposed (docs/scale.md, "Communication").

A communication kernel is a device kernel of op class ``communication`` (NCCL / RCCL collectives
and send/recv: :data:`tracekit.analysis.regions.kernel_classes.OP_CLASSES`). Its **exposed** part is the part of
its interval during which no compute kernel (any other kernel, not memcpy/memset) runs on the same
device — i.e. not overlapped by compute on another stream (two kernels of one stream never
overlap). Per kernel::

    covered = |[start, end) ∩ union(compute kernels of its device)|      exposed = dur − covered

Sums are per kernel, so two communication kernels running at once on two streams both count.
A kernel's phase is the phase of the phase unit whose window holds its start (phase units and
windows as in the analysis; ``unphased`` outside every unit). All vectorised: the compute
kernels of a device are merged into disjoint blocks, and the covered time up to any instant is
read from their running sum with an as-of join.
"""

from __future__ import annotations

import re

import polars as pl

from tracekit.analysis.regions.kernel_classes import communication_names
from tracekit.analysis.regions.metrics import positions
from tracekit.costmodel.args import parse_args, tensors
from tracekit.tables.cases import first
from tracekit.tables.gather import take

COMM_CLASS = "communication"
UNPHASED = "unphased"
COMM_SCHEMA = {
    "phase": pl.String(),
    "comm_count": pl.Int64(),
    "comm_ns": pl.Int64(),
    "exposed_ns": pl.Int64(),
    "exposed_fraction": pl.Float64(),
    "comm_bytes": pl.Int64(),  # Σ input messages of the kernels whose trace gives one (null: none does)
    "sized_ns": pl.Int64(),  # Σ duration of those kernels
    "algbw_bytes_per_s": pl.Float64(),  # nccl-tests' algorithm bandwidth: data size S / sized_ns
    "busbw_bytes_per_s": pl.Float64(),  # nccl-tests' bus bandwidth: algbw × the collective's factor (world size)
}
# Collective kind from a kernel's (else its op's) name, first match, case-insensitive.
KINDS = (
    ("all_gather", r"all_?gather"),
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_to_all", r"all_?to_?all"),
    ("all_reduce", r"all_?reduce|cross_device_reduce"),
)


def collective_kind(name: pl.Expr) -> pl.Expr:
    """``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all`` or ``other`` (broadcast,
    send/recv, ...)."""
    expr = pl.lit("other")
    for kind, pat in reversed(KINDS):
        expr = pl.when(name.str.contains(f"(?i){pat}")).then(pl.lit(kind)).otherwise(expr)
    return expr


def _kind(name: str) -> str:
    return next((k for k, pat in KINDS if re.search(pat, name, re.IGNORECASE)), "other")


def nccl_factors(kind: pl.Expr, n: int | None) -> tuple[pl.Expr, pl.Expr]:
    """(S ÷ input message, bus bandwidth ÷ algorithm bandwidth) of each collective, nccl-tests'
    PERFORMANCE.md conventions for ``n`` ranks: S is the input for all-reduce, reduce-scatter and
    all-to-all and the output (n × the input) for all-gather; the bus factor is 2(n−1)/n for
    all-reduce, (n−1)/n for all-gather, reduce-scatter and all-to-all, 1 for the others. Null
    where ``n`` is needed and unknown."""
    if n is None or n < 1:
        size = pl.when(kind == "all_gather").then(None).otherwise(1.0)
        return size.cast(pl.Float64()), pl.when(kind == "other").then(1.0).otherwise(None).cast(pl.Float64())
    size = pl.when(kind == "all_gather").then(float(n)).otherwise(1.0)
    bus = first(
        (kind == "all_reduce", pl.lit(2.0 * (n - 1) / n)),
        (kind.is_in(["all_gather", "reduce_scatter", "all_to_all"]), pl.lit((n - 1) / n)),
        otherwise=pl.lit(1.0),
    )
    return size, bus


def op_message(name: str, dims: str | None, types: list[str] | None) -> int | None:
    """A collective op's input message in bytes from its recorded tensors: the shard (the smallest
    tensor) of an all-gather, else the largest tensor (all-reduce's in-place buffer, the full input
    of a reduce-scatter or all-to-all); None without a typed tensor. Tensor lists hide their type
    and are not read."""
    t = [a for a in tensors(parse_args(dims, types, None)) if a.dims and not a.is_list]
    if not t:
        return None
    sizes = [int(a.nbytes) for a in t]
    return min(sizes) if _kind(name) == "all_gather" else max(sizes)


def with_op_messages(comm: pl.DataFrame, acts: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """``comm`` (:func:`exposed`) with ``comm_bytes`` filled, where the kernel states none, from
    the tensors of the op that launched it (else that op's parent): ``symm_mem::multimem_all_reduce_``
    of a bf16 [2557440] tensor moves 5,114,880 B though its kernel has no size args. One Python
    call per distinct (op name, Input Dims, Input type)."""
    need = {"op_id", "name", "input_dims", "input_types"}
    if (
        not comm.height
        or "kernel_row" not in comm.columns
        or not need <= set(ops.columns)
        or "op_id" not in acts.columns
    ):
        return comm
    missing = comm["comm_bytes"].is_null()
    if not missing.any():
        return comm
    act_pos = positions(comm["kernel_row"], acts["act_id"])
    op_pos = positions(take(acts["op_id"], act_pos), ops["op_id"])
    parent_pos = positions(take(ops["parent_id"], op_pos), ops["op_id"]) if "parent_id" in ops.columns else op_pos
    sizes = []
    for pos in (op_pos, parent_pos):
        sig = pl.DataFrame(
            {
                "n": take(ops["name"], pos).cast(pl.String),
                "d": take(ops["input_dims"], pos).cast(pl.String),
                "t": take(ops["input_types"], pos),
            }
        )
        uniq = sig.unique(maintain_order=True)
        vals = [op_message(str(r[0] or ""), r[1], r[2]) for r in uniq.iter_rows()]
        uniq = uniq.with_columns(pl.Series("b", vals, dtype=pl.Int64()))
        sizes.append(sig.join(uniq, on=["n", "d", "t"], how="left", nulls_equal=True, maintain_order="left")["b"])
    from_op = sizes[0].fill_null(sizes[1])
    return comm.with_columns(pl.col("comm_bytes").fill_null(from_op))


def _merged(iv: pl.LazyFrame) -> pl.LazyFrame:
    """Disjoint blocks (``device``, ``b_start``, ``b_end``) covering the union of intervals per device,
    with ``b_before`` = covered length of the device's earlier blocks."""
    w = iv.select("device", "start_ns", "end_ns").sort("device", "start_ns")
    w = w.with_columns(pl.col("end_ns").cum_max().shift(1).over("device").alias("_prev"))
    w = w.with_columns(
        (pl.col("_prev").is_null() | (pl.col("start_ns") > pl.col("_prev")))
        .cast(pl.Int64())
        .cum_sum()
        .over("device")
        .alias("_block")
    )
    b = (
        w.group_by("device", "_block")
        .agg(pl.col("start_ns").min().alias("b_start"), pl.col("end_ns").max().alias("b_end"))
        .sort("device", "b_start")
    )
    return b.with_columns(
        ((pl.col("b_end") - pl.col("b_start")).cum_sum().over("device") - (pl.col("b_end") - pl.col("b_start"))).alias(
            "b_before"
        )
    ).drop("_block")


def _touching(compute: pl.DataFrame, comm: pl.DataFrame) -> pl.LazyFrame:
    """The compute kernels that overlap a communication kernel of their device. The covered time
    of a communication kernel is the length of its interval's intersection with the union of its
    device's compute kernels, and a kernel wholly outside every communication kernel adds nothing
    to any of those intersections: the blocks of these alone give every kernel the same covered
    time (in a trace where few compute kernels overlap a communication kernel, most of the work
    is skipped). As-of join: the last block of the communication kernels'
    union starting at or before a compute kernel's end is the only one that can overlap it (the
    blocks are disjoint and ordered); it does when it ends after the kernel starts."""
    spans = _merged(comm.lazy()).select("device", pl.col("b_start").alias("_us"), pl.col("b_end").alias("_ue"))
    return (
        compute.lazy()
        .sort("end_ns")
        .join_asof(
            spans.sort("_us"),
            left_on="end_ns",
            right_on="_us",
            by="device",
            strategy="backward",
            check_sortedness=False,
        )
        .filter((pl.col("_ue") > pl.col("start_ns")) | pl.col("device").is_null())  # no device: kept, as before
        .select("device", "start_ns", "end_ns")
    )


def covered_until(df: pl.LazyFrame, col: str, blocks: pl.LazyFrame, alias: str) -> pl.LazyFrame:
    """Add ``alias``: covered length of the device's blocks before instant ``df[col]`` (a step of
    the caller's lazy query)."""
    j = (
        df.with_row_index("_r")
        .sort(col)
        .join_asof(
            blocks.sort("b_start"),
            left_on=col,
            right_on="b_start",
            by="device",
            strategy="backward",
            check_sortedness=False,
        )
    )
    cov = pl.col("b_before") + (pl.min_horizontal(pl.col(col), pl.col("b_end")) - pl.col("b_start")).clip(lower_bound=0)
    return j.with_columns(cov.fill_null(0).alias(alias)).sort("_r").drop("_r", "b_start", "b_end", "b_before")


def comm_kernels(kernels: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(communication kernels: ``device, stream, name, start_ns, end_ns, op_class, comm_bytes``; compute
    kernels: ``device, start_ns, end_ns``) of a kernels table (``kind == 'kernel'``)."""
    kernel = pl.col("kind") == "kernel"
    # the name rules run once per distinct name, not per kernel (names average ~200 bytes); the
    # rows are then picked by name, without a join that copies every kernel row (which raised this
    # step's peak on a big trace)
    names = kernels.lazy().filter(kernel).select(pl.col("name").unique()).collect(engine="in-memory")
    comm_names = communication_names(names["name"])
    is_comm = pl.col("name").is_in(pl.lit(comm_names).implode()).fill_null(False)
    k = kernels.lazy().with_row_index("kernel_row")  # lazy: the filters gather only the selected columns
    size = pl.col("comm_bytes") if "comm_bytes" in kernels.columns else pl.lit(None, dtype=pl.Int64())
    comm = k.filter(kernel & is_comm).select(
        "device",
        "stream",
        "name",
        "start_ns",
        "end_ns",
        pl.lit(COMM_CLASS).alias("op_class"),
        size.alias("comm_bytes"),
        pl.col("kernel_row").cast(pl.Int64()),
    )
    compute = k.filter(kernel & ~is_comm).select("device", "start_ns", "end_ns")
    comm_df, compute_df = pl.collect_all([comm, compute], engine="in-memory")
    return comm_df, compute_df


def exposed(kernels: pl.DataFrame) -> pl.DataFrame:
    """Each communication kernel with ``dur_ns``, ``covered_ns`` and ``exposed_ns``."""
    comm, compute = comm_kernels(kernels)
    if comm.height == 0:
        return comm.with_columns(
            *(pl.lit(0, dtype=pl.Int64()).alias(c) for c in ("dur_ns", "covered_ns", "exposed_ns"))
        )
    blocks = _merged(_touching(compute, comm)).collect(engine="in-memory").lazy()
    q = covered_until(comm.lazy(), "end_ns", blocks, "_c_end")
    q = covered_until(q, "start_ns", blocks, "_c_start")
    dur = pl.col("end_ns") - pl.col("start_ns")
    return (
        q.with_columns(dur.alias("dur_ns"), (pl.col("_c_end") - pl.col("_c_start")).alias("covered_ns"))
        .with_columns((pl.col("dur_ns") - pl.col("covered_ns")).alias("exposed_ns"))
        .drop("_c_end", "_c_start")
        .collect(engine="in-memory")
    )


def comm_by_phase(kernels: pl.DataFrame, units: pl.DataFrame, world_size: int | None = None) -> pl.DataFrame:
    """Per phase (and a ``trace`` row for all of them): ``comm_count``, ``comm_ns``, ``exposed_ns``,
    ``exposed_fraction``. ``units``: the phase units (``phase``, ``w_start``, ``w_end``)."""
    return exposed_by_phase(exposed(kernels), units, world_size)


def exposed_by_phase(e: pl.DataFrame, units: pl.DataFrame, world_size: int | None = None) -> pl.DataFrame:
    """:func:`comm_by_phase` from the :func:`exposed` communication kernels ``e`` (a caller that
    no longer holds the kernels table when the phase units are known takes them first).
    ``world_size``: the ranks of the collectives, for the data size of all-gathers and the bus
    bandwidth (:func:`nccl_factors`)."""
    if e.height == 0:
        return pl.DataFrame(schema=COMM_SCHEMA)
    u = units.select("phase", pl.col("w_start").cast(pl.Int64()), pl.col("w_end").cast(pl.Int64()))
    q = e.lazy()
    if u.height:
        q = q.sort("start_ns").join_asof(
            u.lazy().sort("w_start"), left_on="start_ns", right_on="w_start", strategy="backward"
        )
        q = q.with_columns(
            pl.when(pl.col("start_ns") < pl.col("w_end"))
            .then(pl.col("phase"))
            .otherwise(pl.lit(UNPHASED))
            .alias("phase")
        )
    else:
        q = q.with_columns(pl.lit(UNPHASED).alias("phase"))
    sized = pl.col("comm_bytes").is_not_null() if "comm_bytes" in e.columns else pl.lit(False)
    nbytes = pl.col("comm_bytes") if "comm_bytes" in e.columns else pl.lit(None, dtype=pl.Int64())
    size_f, bus_f = nccl_factors(collective_kind(pl.col("name")), world_size)
    q = q.with_columns((nbytes * size_f).alias("_s"), (nbytes * size_f * bus_f).alias("_bus"))
    aggs = [
        pl.len().cast(pl.Int64()).alias("comm_count"),
        pl.col("dur_ns").sum().cast(pl.Int64()).alias("comm_ns"),
        pl.col("exposed_ns").sum().cast(pl.Int64()).alias("exposed_ns"),
        pl.when(sized.any()).then(nbytes.sum()).cast(pl.Int64()).alias("comm_bytes"),
        pl.col("dur_ns").filter(sized).sum().cast(pl.Int64()).alias("sized_ns"),
        # a sized kernel whose data size or bus factor needs the unknown world size: no figure
        pl.when(pl.col("_s").is_not_null().sum() == sized.sum()).then(pl.col("_s").sum()).alias("_s"),
        pl.when(pl.col("_bus").is_not_null().sum() == sized.sum()).then(pl.col("_bus").sum()).alias("_bus"),
    ]
    per = q.group_by("phase").agg(aggs).sort("phase")
    whole = q.select(pl.lit("trace").alias("phase"), *aggs)
    out = pl.concat([whole, per])
    return (
        out.with_columns(
            (pl.col("exposed_ns") / pl.col("comm_ns")).alias("exposed_fraction"),
            pl.when(pl.col("sized_ns") > 0).then(pl.col("_s") / (pl.col("sized_ns") * 1e-9)).alias("algbw_bytes_per_s"),
            pl.when(pl.col("sized_ns") > 0)
            .then(pl.col("_bus") / (pl.col("sized_ns") * 1e-9))
            .alias("busbw_bytes_per_s"),
        )
        .select(list(COMM_SCHEMA))
        .collect(engine="in-memory")
    )
