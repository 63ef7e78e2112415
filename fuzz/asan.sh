#!/usr/bin/env bash
# The native Kineto scanner built with AddressSanitizer + UndefinedBehaviorSanitizer, run over the
# Kineto tests (and the seeded fuzz module). The normal build is left alone: the sanitized copy of
# the package goes to build/asan/ and is put first on PYTHONPATH for this run only.
#   fuzz/asan.sh [pytest args...]      (default: the Kineto tests listed below)
#   fuzz/asan.sh --run SCRIPT [args]    (any Python script against the sanitized build, e.g. an
#                                        atheris harness: fuzz/asan.sh --run fuzz/kscan_atheris.py)
# Needs gcc (or cc) with libasan/libubsan. Python itself is not sanitized, so libasan is preloaded.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
CC=${CC:-gcc}
OUT=build/asan
rm -rf "$OUT"
mkdir -p "$OUT"
cp -r tracekit "$OUT/tracekit"
find "$OUT/tracekit" -name '_kscan*.so' -delete
INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
EXT=$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
"$CC" -shared -fPIC -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
  -fno-sanitize-recover=undefined -I"$INC" tracekit/sources/kineto/_native/_kscan.c \
  -o "$OUT/tracekit/sources/kineto/_kscan$EXT"
ASAN_LIB=$("$CC" -print-file-name=libasan.so)
UBSAN_LIB=$("$CC" -print-file-name=libubsan.so)
export PYTHONPATH="$PWD/$OUT${PYTHONPATH:+:$PYTHONPATH}"
export LD_PRELOAD="$ASAN_LIB $UBSAN_LIB"
# Python's own allocations are not instrumented: leaks are not ours to report; any memory error
# or undefined behaviour aborts the run (exit != 0).
# Reports go to files, not stderr: pytest captures a test's stderr, and a sanitizer that stops the
# process mid-test would take the report with it. They are printed below when the run fails.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1:log_path=$PWD/$OUT/report-asan"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:log_path=$PWD/$OUT/report-ubsan"
export MPLBACKEND=Agg
export PYTHONSAFEPATH=1  # the working directory must not shadow the sanitized copy (Python >= 3.11)
"$PY" -c 'import tracekit.sources.kineto._kscan as k, sys; assert "build/asan" in k.__file__, k.__file__; print("sanitized scanner:", k.__file__)'
status=0
if [ "${1:-}" = "--run" ]; then
  shift
  "$PY" "$@" || status=$?
else
if [ $# -eq 0 ]; then
  set -- tests/test_kineto_native.py tests/test_kineto_native_bad_input.py tests/test_kineto_native_scan.py \
         tests/test_kineto_bad_input.py tests/test_hostile_kineto.py \
         tests/test_hostile_fuzz.py -m "not slow"
fi
"$PY" -m pytest -q -p no:cacheprovider "$@" || status=$?
fi
if [ "$status" -ne 0 ]; then
  for f in "$OUT"/report-*; do [ -e "$f" ] && { echo "== $f"; cat "$f"; }; done
fi
exit "$status"
