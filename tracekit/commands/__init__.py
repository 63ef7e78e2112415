"""Application services: one module per command, between ``cli/`` and the library.

A service takes one typed request (a frozen dataclass of the command's options) and owns the
command's flow — check the output path, load, reuse a stored result, analyse, store, render — and
returns what the command prints or writes (:class:`tracekit.commands.output.Output`). It raises the
library's typed errors and never prints; the click command in ``cli/`` builds the request, makes
one call and prints. Tested without click (tests/test_commands.py).

Imports are at module level, with the measured exceptions of the ``analyze`` service, whose
small case (``analyze FILE --format json``) must stay as fast as a plain script:
:mod:`tracekit.commands.analyze` imports no polars at module level and reaches its heavy half
(:mod:`tracekit.commands.analyze_compute`) only after polars' allocator is set (tracekit/tuning.py)
and a trace file's early read has started (sources/kineto/reading/early.py), and never when a
stored JSON document answers (tests/test_startup.py); the heavy half imports the text screen (not
needed for JSON) and the ranks comparison (not for one trace file) where they are used: together
≈ 60 ms of imports, 5–8 % of that command's CPU time.
"""
