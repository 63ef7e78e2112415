# Developer shortcuts. PY defaults to the project venv.
PY ?= .venv/bin/python
TK ?= .venv/bin/tracekit
DEMO ?= out/demo
SMALL_MODEL = --layers 2 --d-model 256 --heads 4 --kv-heads 2 --vocab 2048 --max-context 256 --threads 1

.PHONY: demo test venv browser notebooks sample-traces gpu-check bench-annotate

# The project venv with everything installed from pyproject.toml (torch pinned to the CPU build).
.venv/bin/tracekit: pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install -q -e '.[workloads,dev,dask]'
	touch $@

venv: .venv/bin/tracekit

# Headless Chromium (Debian package) for the HTML-report browser tests. As root (CI) it is
# installed when missing and the browser tests must run; as a normal user it cannot be installed,
# so the browser tests are skipped with that reason and everything else still runs.
browser:
	@if command -v chromium >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ]; then apt-get update -qq >/dev/null 2>&1; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	else echo "browser: Chromium is not installed and installing it needs root (apt-get install chromium):" \
	  "the browser tests will be skipped"; fi

# Type-check and run the whole test suite (what CI runs).
test: venv browser
	.venv/bin/mypy tracekit
	TRACEKIT_REQUIRE_BROWSER=$$([ "$$(id -u)" = 0 ] && echo 1 || echo 0) MPLBACKEND=Agg .venv/bin/pytest -q -p no:cacheprovider

# Run the small LLM workload on one thread, then summarise, analyse and report its trace against
# this machine's own measured ceiling (calibrated with the run's thread count and kept in $(CAL);
# `calibrate --reuse` measures again when the kept file was flagged noisy or busy, predates the
# last boot, or is over a week old). Ends with each phase's verdict (a CPU diagnostic).
CAL ?= out/calibration/cpu-1thread.json

demo: venv
	@mkdir -p $(dir $(CAL))
	$(TK) calibrate --device cpu --threads 1 --out $(CAL) --reuse
	$(TK) run llm $(SMALL_MODEL) --batch 4 --prompt-len uniform:16:96 --output-len fixed:8 --out $(DEMO) --force
	$(TK) summary $(DEMO)/llm.pt.trace.json.gz
	$(TK) analyze $(DEMO)/llm.pt.trace.json.gz --hardware $(CAL)
	$(TK) report $(DEMO)/llm.pt.trace.json.gz --hardware $(CAL) --format html --out $(DEMO)/report.html --force

# Re-execute the notebooks and store them with their outputs (tiny torch runs, one thread).
notebooks: venv
	MPLBACKEND=Agg $(PY) notebooks/make_notebooks.py

# Regenerate sample_traces/ (commands and notes in sample_traces/README.md).
sample-traces:
	rm -rf sample_traces/phase_shape sample_traces/llm sample_traces/llm_memory sample_traces/serve sample_traces/serve_sweep
	$(TK) run phase-shape --d 512 --dtype float32 --prefill-rows 16,64,256,1024 --decode-rows 1,4,16 \
	  --warmup 1 --active 2 --reps 2 --threads 1 --out sample_traces/phase_shape
	$(TK) run llm $(SMALL_MODEL) --batch 4 --prompt-len uniform:16:96 --output-len fixed:8 --out sample_traces/llm
	$(TK) run llm $(SMALL_MODEL) --batch 4 --prompt-len uniform:16:96 --output-len fixed:8 --profile-memory \
	  --kv-cache dynamic --out sample_traces/llm_memory
	$(TK) run serve $(SMALL_MODEL) --requests 8 --prompt-len uniform:16:120 --output-len uniform:2:8 \
	  --arrival interval:10 --token-budget 64 --max-seqs 4 --chunk 32 --warmup-requests 1 --out sample_traces/serve
	rm -rf sample_traces/serve_sweep
	$(TK) run serve $(SMALL_MODEL) --requests 10 --prompt-len uniform:16:120 --output-len uniform:4:12 \
	  --token-budget 64 --max-seqs 4 --chunk 32 --warmup-requests 1 --rate-sweep 10,40,160 --out sample_traces/serve_sweep
	rm -rf sample_traces/serve_sweep/rate_*
	$(TK) plot latency-throughput sample_traces/serve_sweep --slo ttft=300,tpot=40 --out sample_traces/serve_sweep/latency_throughput.png

# All three workloads on CUDA with their checks (needs a GPU).
gpu-check:
	benchmarks/gpu_check.sh

bench-annotate:
	$(PY) benchmarks/annotate_overhead.py --threads 1
