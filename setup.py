"""The native Kineto scanner (tracekit/_kscan.c, tracekit/_kjson.h). Optional: when it cannot be
compiled, tracekit installs without it and reads traces with its pure-Python path (same tables,
slower)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracekit._kscan", ["tracekit/_kscan.c"], depends=["tracekit/_kjson.h", "tracekit/_knest.h"],
                             optional=True)])
