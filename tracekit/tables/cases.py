"""``first``: a polars ``when / then`` chain written as a table of (condition, value) rows."""

from __future__ import annotations

from typing import Any

import polars as pl


def first(*cases: tuple[pl.Expr, pl.Expr], otherwise: pl.Expr | None = None) -> pl.Expr:
    """The value of the first case whose condition holds, else ``otherwise`` (null when None):
    ``pl.when(c1).then(v1).when(c2).then(v2)…otherwise(v)``. Values are expressions (a plain
    string would name a column, as in ``then``)."""
    (cond, value), *rest = cases
    expr: Any = pl.when(cond).then(value)
    for cond, value in rest:
        expr = expr.when(cond).then(value)
    return expr if otherwise is None else expr.otherwise(otherwise)
