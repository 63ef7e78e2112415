"""The native Kineto scanner (tracekit/sources/kineto/_native/_kscan.c, _kjson.h in the same
folder). Optional: when it cannot be compiled, tracekit installs without it and reads traces with
its pure-Python path (same tables, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracekit.sources.kineto._kscan",
            ["tracekit/sources/kineto/_native/_kscan.c"],
            depends=[
                "tracekit/sources/kineto/_native/_kjson.h",
                "tracekit/sources/kineto/_native/_knest.h",
                "tracekit/sources/kineto/_native/_karrow.h",
            ],
            optional=True,
        )
    ]
)
