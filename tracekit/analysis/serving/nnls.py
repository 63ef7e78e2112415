"""Non-negative least squares: min ‖A·x − b‖² subject to x ≥ 0 (Lawson & Hanson, *Solving Least
Squares Problems*, 1974, ch. 23, algorithm NNLS), in numpy.

Why not ``numpy.linalg.lstsq``: a step costs time for every token and sequence it carries, so a
negative coefficient (a step that gets *faster* with more prefill tokens) is never a cost, only
noise fitted; the what-if simulated with one printed TPOT p50 = 0 ms (issue 27). Why not scipy:
it is not a dependency, and the problem here has ≤ 4 columns.

The active-set method: start with every coefficient at 0 (all "active", held at the bound); move
the column whose gradient most wants to grow into the passive set, solve the unconstrained least
squares on the passive columns, and step back along the segment to the last feasible point while a
passive coefficient would go negative. It terminates in a finite number of steps (each passive set
is visited at most once); the cap on iterations only guards against rounding cycling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np


def nnls(a: np.ndarray, b: np.ndarray, tol: float = 1e-10) -> np.ndarray:
    """``x ≥ 0`` minimising ``‖a·x − b‖²`` (``a``: n × k, ``b``: n). ``tol`` is relative to the
    largest gradient entry at x = 0 (the scale of the problem)."""
    import numpy as np

    n, k = a.shape
    x = np.zeros(k)
    passive = np.zeros(k, dtype=bool)
    w = a.T @ (b - a @ x)
    eps = tol * max(1.0, float(np.abs(w).max()) if k else 1.0)
    for _ in range(3 * k + 10):
        if passive.all() or not (w[~passive] > eps).any():
            break
        j = int(np.argmax(np.where(passive, -np.inf, w)))
        passive[j] = True
        while True:
            z = np.zeros(k)
            z[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if (z[passive] > 0).all():
                x = z
                break
            # step from x towards z until the first passive coefficient reaches 0
            neg = passive & (z <= 0)
            alpha = float(np.min(x[neg] / (x[neg] - z[neg])))
            x = x + alpha * (z - x)
            passive &= x > eps * 1e-3
            x[~passive] = 0.0
            if not passive.any():
                break
        w = a.T @ (b - a @ x)
    return x
