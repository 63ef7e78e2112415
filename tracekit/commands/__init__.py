"""Application services: one module per command, between ``cli/`` and the library.

A service takes one typed request (a frozen dataclass of the command's options) and owns the
command's flow — check the output path, load, reuse a stored result, analyse, store, render — and
returns what the command prints or writes (:class:`tracekit.commands.output.Output`). It raises the
library's typed errors and never prints; the click command in ``cli/`` builds the request, makes
one call and prints. Tested without click (tests/test_commands.py).

Imports are at module level, with measured exceptions for the small commands (``analyze FILE
--format json``, ``report FILE``): :mod:`tracekit.commands.analyze` imports no polars at module
level and reaches its heavy half (:mod:`tracekit.commands.analyze_compute`) only after polars'
allocator is set (tracekit/tuning.py), and never when a stored JSON document answers
(tests/test_startup.py); the analyze screen (not needed for JSON) and the comparison of ranks (not
needed for one trace) are imported where used: ≈ 60 ms of imports, 5–8 % of ``analyze FILE
--format json``'s CPU time, ≈ 20 ms of ``report FILE``'s.
"""
