# pylog — `make help` lists the targets. Everything runs inside ./.venv,
# which `make install` creates, so a fresh clone needs nothing set up by hand.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
NATIVE_SRC := $(shell find rust -name '*.rs' -o -name Cargo.toml) Cargo.toml pyproject.toml

.DEFAULT_GOAL := help
.PHONY: help install build protocol tools go-client node-client run cluster test test-rust test-python bench fuzz lint format clean pipeline

help: ## show this help
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip "maturin>=1.5,<2"
	touch $(STAMP)

install: $(STAMP) build ## create .venv with pylog (release build of the native core) and every test/bench/lint tool

build: $(STAMP) ## (re)build the native extension in place, with the test/bench/lint extras
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q -E test,bench,dev,spark
	@$(PY) -c "import pylog._native as n; print('pylog._native', n.__version__)"

protocol: ## regenerate python/pylog/protocol/messages/ (typed classes, codecs) from the JSON definitions
	PYTHONPATH=python $(if $(wildcard $(PY)),$(PY),$(PYTHON)) -m pylog.protocol.generator

run: install ## start a broker on PLAINTEXT://127.0.0.1:9092 with its data in ./pylog-data (Ctrl-C stops it cleanly)
	$(VENV)/bin/pylog broker start

cluster: install tools ## run a local cluster until Ctrl-C: ZooKeeper on 127.0.0.1:2181, brokers 1-3 on 127.0.0.1:9092-9094, data and logs in ./pylog-cluster
	$(VENV)/bin/pylog cluster local --brokers 3 --dir ./pylog-cluster

test: install tools go-client node-client test-rust test-python ## install everything the tests need, then run all tests

tools: ## system tools the tests drive (kcat; a Java runtime for Spark; ZooKeeper for the cluster; npm), from Debian — needs root or sudo; checks for Go
	@missing=""; command -v kcat >/dev/null 2>&1 || missing="kcat"; \
	  command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	  [ -f /usr/share/java/zookeeper.jar ] || missing="$$missing zookeeper"; \
	  if [ -n "$$missing" ]; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  fi
	@kcat -V | head -1
	@java -version 2>&1 | head -1
	@ls /usr/share/java/zookeeper-3*.jar | sed 's|.*/||'
	@go version 2>/dev/null || { echo "no Go toolchain on PATH: the Go client tests need Go >= 1.26 (https://go.dev/dl)"; exit 1; }
	@command -v npm >/dev/null 2>&1 || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null; }
	@echo "node $$(node --version), npm $$(npm --version 2>/dev/null)"

# The Go and Node client programs the tests drive, built or installed into a
# cache outside the repository (tests/client_programs.py finds them there);
# both are skipped when up to date.
CLIENT_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog
GO_CACHE     := $(CLIENT_CACHE)/go
GO_CLIENT    := $(GO_CACHE)/bin/pylog-go-client
GO_ENV       := GOMODCACHE=$(GO_CACHE)/mod GOCACHE=$(GO_CACHE)/build GOFLAGS="-mod=mod -modcacherw -buildvcs=false"
NODE_CACHE   := $(CLIENT_CACHE)/node
NODE_STAMP   := $(NODE_CACHE)/node_modules/.package-lock.json

GO_KGO_TEST  := $(GO_CACHE)/bin/kgo.test

go-client: $(GO_CLIENT) $(GO_KGO_TEST) ## build tests/go (franz-go and sarama behind one CLI) and franz-go's own kgo tests into ~/.cache/pylog/go

$(GO_CLIENT): $(wildcard tests/go/*)
	cd tests/go && $(GO_ENV) go build -o $@ .
	touch $@
	@echo "go client: $@"

# franz-go's own integration tests (package kgo, from the module zip of the
# version tests/go requires), run against pylog by test_go_clients.py.
$(GO_KGO_TEST): tests/go/go.mod tests/go/go.sum
	cd tests/go && $(GO_ENV) go test -c -o $@ github.com/twmb/franz-go/pkg/kgo
	touch $@
	@echo "franz-go kgo tests: $@"

node-client: $(NODE_STAMP) ## install tests/node's packages (kafkajs) with npm ci into ~/.cache/pylog/node

$(NODE_STAMP): tests/node/package.json tests/node/package-lock.json
	mkdir -p $(NODE_CACHE)
	cp tests/node/package.json tests/node/package-lock.json $(NODE_CACHE)/
	npm ci --prefix $(NODE_CACHE) --no-audit --no-fund --loglevel=error
	touch $@

test-rust: ## cargo test of the native core
	cargo test -q --workspace --exclude pylog-py

test-python: ## pytest (real files, real segment bytes)
	$(PY) -m pytest -q tests

bench: install ## print the performance figures and their ratios against same-run baselines
	cargo bench -q -p pylog-core -- --warm-up-time 1 --measurement-time 3
	$(PY) -m pytest -q bench --benchmark-columns=mean,median,ops --benchmark-sort=name
	$(PY) bench/storage_bench.py
	$(PY) bench/broker_bench.py
	$(PY) bench/group_bench.py
	$(PY) bench/hostile_request_bench.py
	$(PY) bench/cleaner_bench.py
	$(PY) bench/spark_bench.py

FUZZ_SECONDS ?= 60
FUZZ_TARGETS := batch records decompress

fuzz: ## run each cargo-fuzz target of the native core for FUZZ_SECONDS (60) each; needs `cargo install cargo-fuzz` and a nightly toolchain (not part of make test)
	cd rust/pylog-core && for t in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/corpus/$$t && \
	  cargo +nightly fuzz run $$t fuzz/corpus/$$t fuzz/seeds/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -timeout=10 || exit 1; \
	done

lint: install ## rustfmt, clippy, ruff, mypy, stubtest
	cargo fmt --all -- --check
	cargo clippy -q --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests bench examples
	$(VENV)/bin/ruff format --check python tests bench
	$(VENV)/bin/mypy
	$(PY) -m mypy.stubtest pylog._native --ignore-missing-stub

format: install ## apply rustfmt and ruff format
	cargo fmt --all
	$(VENV)/bin/ruff check --fix -q python tests bench || true
	$(VENV)/bin/ruff format -q python tests bench

pipeline: install ## the Spark example end to end: produce → batch from segments → Parquet → streaming → topic
	$(PY) examples/pipeline/run.py

clean: ## remove build products and the venv
	cargo clean
	rm -rf $(VENV) python/pylog/*.so .pytest_cache .mypy_cache .ruff_cache .hypothesis .benchmarks
