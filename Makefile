# The commands the README and .ci/run share.
# A persistent virtual environment (torch is several GB) lives outside the clone
# and is reused across runs; override with VENV=/path.
VENV ?= $(HOME)/.cache/kvbudget/venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export VIRTUAL_ENV := $(VENV)
export PATH := $(VENV)/bin:$(PATH)

.PHONY: venv deps deps-run develop run sglang test test-rust test-python test-parity-long bench bench-instructions fuzz fuzz-cov fuzz-cov-short check-wheel lint lint-rust lint-python fmt stubs

$(PY):
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip

venv: $(PY)

# Runtime deps for the main job (no torch: planning needs none).
deps-run: venv
	$(PIP) install -q "maturin>=1.16,<2" "numpy>=1.24" "rich>=13"

# Everything the tests need, torch included (installed once, then reused).
deps: venv
	$(PIP) install -q "maturin>=1.16,<2" "numpy>=1.24" "rich>=13" "pytest>=8" \
	    "hypothesis>=6.100" "pytest-benchmark>=4" "mypy>=1.10" "matplotlib>=3.7" torch \
	    "transformers==5.19.0" "msgspec==0.23.0"

develop: venv
	$(VENV)/bin/maturin develop --release -q

# Quickstart 1: install and plan the embedded default.
run: deps-run develop
	$(VENV)/bin/kvbudget

# Property tests run proptest's 256 cases by default; PROPTEST_CASES=10000 in CI.
test-rust:
	cargo test -p kvbudget-core --release --lib --tests
	cargo run --release -q -p kvbudget-core --example fuzz -- --iters 100000
	cargo run --release -q -p kvbudget-core --example fuzz -- --iters 50000 --unvalidated --seed 99

# The long fuzz pass (about 25 s per million executions here).
fuzz:
	cargo run --release -q -p kvbudget-core --example fuzz -- --iters $(or $(ITERS),1000000)

# Coverage-guided fuzzing (cargo-fuzz, libFuzzer; a nightly toolchain): rust/fuzz/.
# RUNS executions of each target (api, plan_json, batch); the corpus grows in rust/fuzz/corpus
# (local), seeded by rust/fuzz/seeds/<target> (committed: every input that once crashed).
FUZZ_TARGETS := api plan_json batch
FUZZ = mkdir -p rust/fuzz/corpus/$$t rust/fuzz/seeds/$$t && \
	cargo +nightly fuzz run --fuzz-dir rust/fuzz -s none $$t rust/fuzz/corpus/$$t rust/fuzz/seeds/$$t
fuzz-cov:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	for t in $(FUZZ_TARGETS); do $(FUZZ) -- -runs=$(or $(RUNS),10000000) || exit 1; done

# The short pass CI runs: FUZZ_SECONDS seconds per target.
fuzz-cov-short:
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
	for t in $(FUZZ_TARGETS); do $(FUZZ) -- -max_total_time=$(or $(FUZZ_SECONDS),15) || exit 1; done

# SGLang's released pool-sizing code for the parity test (tests/test_sglang_parity.py):
# the PyPI wheel, fetched once into ~/.cache/kvbudget/wheels and checked against its RECORD.
sglang: venv
	$(PY) tools/fetch_sglang.py

test-python:
	$(PY) -m pytest -q

# The long parity run: 200,000 cases against SGLang's code (about 2 minutes here).
test-parity-long: sglang
	KVBUDGET_PARITY_CASES=$(or $(CASES),200000) KVBUDGET_PARITY_SEED=$(or $(SEED),1000000) \
	    $(PY) -m pytest -q tests/test_sglang_parity.py -k differential
	KVBUDGET_VLLM_WRAPPER_CASES=$(or $(WRAPPER_CASES),1000) \
	    $(PY) -m pytest -q tests/test_vllm_wrappers.py -k read_as_vllm
	KVBUDGET_MODEL_CASES=$(or $(MODEL_CASES),400) \
	    $(PY) -m pytest -q tests/test_sglang_model.py -k every_family

# A plain pip install of the built wheel in a fresh venv: the CLI works, allocate names its extra.
check-wheel: venv
	MATURIN=$(VENV)/bin/maturin bash tools/check_wheel.sh

# Quickstart 2: install what the tests need, run every test.
test: deps develop sglang test-rust test-python

bench: develop
	$(PY) -m pytest benches -q --benchmark-enable --benchmark-only

# Instructions per batch row (callgrind; repeatable on a shared machine).
bench-instructions:
	bash benches/callgrind.sh

# The stubs' generated parts (tools/stubgen.py), after a field is added to rust/core/src/fields.rs.
stubs: develop
	$(PY) tools/stubgen.py

lint: lint-rust lint-python

lint-rust:
	cargo fmt --all -- --check
	cargo fmt --manifest-path rust/fuzz/Cargo.toml -- --check
	cargo clippy --workspace --all-targets -- -D warnings

# Needs the package built (make develop) and the test deps (make deps).
lint-python:
	$(PY) -m mypy
	$(PY) -m mypy.stubtest kvbudget._core

fmt:
	cargo fmt --all
