# pylog — `make help` lists the targets. Everything runs inside ./.venv,
# which `make install` creates, so a fresh clone needs nothing set up by hand.

PYTHON ?= python3
# Python's compiled modules are written and reused: an environment that turns
# that off (PYTHONDONTWRITEBYTECODE, set on some CI images) makes every process
# the tests start (brokers, CLI calls, Spark's Python workers) compile the
# 5 MB of generated protocol classes again, 3x the import time of pylog.spark.
unexport PYTHONDONTWRITEBYTECODE
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed
BUILT  := $(VENV)/.built
NATIVE_SRC := $(shell find rust -name '*.rs' -o -name Cargo.toml) Cargo.toml pyproject.toml

.DEFAULT_GOAL := help
.PHONY: help install build protocol tools java-client spark-jvm go-client node-client kafka-streams-connect librdkafka-tests run cluster test test-rust test-python test-spark-cluster bench kafka kafka39 fuzz soak lint format clean pipeline wheel spark-compat spark-kafka

help: ## show this help
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip "maturin>=1.5,<2"
	touch $(STAMP)

install: $(BUILT) ## create .venv with pylog (release build of the native core) and every test/bench/lint tool

# $(BUILT) stamps the last build, so a target that needs the venv (and make
# test's stages, each a make of its own) builds again only after a change to
# the Rust sources or pyproject.toml; `make build` always builds.
$(BUILT): $(STAMP) $(NATIVE_SRC)
	@$(MAKE) --no-print-directory build

build: $(STAMP) ## (re)build the native extension in place, with the test/bench/lint extras
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q -E test,bench,dev,spark,console,console-test
	@$(PY) -c "import pylog._native as n; print('pylog._native', n.__version__)"
	@touch $(BUILT)

protocol: ## regenerate python/pylog/protocol/messages/ (typed classes, codecs) from the JSON definitions
	PYTHONPATH=python $(if $(wildcard $(PY)),$(PY),$(PYTHON)) -m pylog.protocol.generator

run: install ## start a broker on PLAINTEXT://127.0.0.1:9092 with its data in ./pylog-data (Ctrl-C stops it cleanly)
	$(VENV)/bin/pylog broker start

cluster: install tools ## run a local cluster until Ctrl-C: ZooKeeper on 127.0.0.1:2181, brokers 1-3 on 127.0.0.1:9092-9094, data and logs in ./pylog-cluster
	$(VENV)/bin/pylog cluster local --brokers 3 --dir ./pylog-cluster

# make test: what the tests need, in stages whose parts run side by side (the
# downloads from Maven Central, PyPI, Debian and the Go proxy overlap the
# compiles), then the tests. apt-get runs alone first (one dpkg lock); each
# Maven build has a local repository of its own, so none share one at once.
SETUP_JOBS ?= 4
test: ## install everything the tests need, then run all tests
	@$(MAKE) --no-print-directory tools
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target install kafka kafka39 java-client spark-jvm go-client node-client kafka-streams-connect librdkafka-tests
	@$(MAKE) --no-print-directory -j$(SETUP_JOBS) --output-sync=target test-rust wheel spark-kafka
	@$(MAKE) --no-print-directory test-python spark-compat

tools: ## system tools the tests drive (kcat; a JDK and Maven for Spark, the Java client and Kafka; ZooKeeper for the cluster; Chromium for the console; Prometheus for the dashboard test; npm), from Debian — needs root or sudo; checks for Go
	@missing=""; command -v kcat >/dev/null 2>&1 || missing="kcat"; \
	  command -v javac >/dev/null 2>&1 || missing="$$missing openjdk-17-jdk-headless"; \
	  command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	  [ -f /usr/share/java/zookeeper.jar ] || missing="$$missing zookeeper"; \
	  command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	  command -v prometheus >/dev/null 2>&1 || missing="$$missing prometheus"; \
	  if [ -n "$$missing" ]; then \
	    SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	  fi
	@kcat -V | head -1
	@java -version 2>&1 | head -1
	@ls /usr/share/java/zookeeper-3*.jar | sed 's|.*/||'
	@mvn -v 2>/dev/null | head -1
	@chromium --version 2>/dev/null | head -1
	@prometheus --version 2>&1 | head -1
	@go version 2>/dev/null || { echo "no Go toolchain on PATH: the Go client tests need Go >= 1.26 (https://go.dev/dl)"; exit 1; }
	@command -v npm >/dev/null 2>&1 || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null; }
	@echo "node $$(node --version), npm $$(npm --version 2>/dev/null)"


# The Java client the tests drive (tests/java: kafka-clients behind a small CLI), built
# by Maven into a cache outside the repository; tests/java_client.py finds it there.
JAVA_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog/java
JAVA_CLIENT_JAR := $(JAVA_CACHE)/build/pylog-java-client.jar
JAVA_CLIENT_SRC := tests/java/pom.xml $(shell find tests/java/src -type f 2>/dev/null)

java-client: $(JAVA_CLIENT_JAR) ## build the Java Kafka client test program (tests/java) with Maven into $(JAVA_CACHE); skipped when up to date

$(JAVA_CLIENT_JAR): $(JAVA_CLIENT_SRC)
	rm -rf $(JAVA_CACHE)/build
	cd tests/java && mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(JAVA_CACHE)/m2 \
	  -Dpylog.build.dir=$(JAVA_CACHE)/build package
	@echo "java client: $@"

# format("pylog-jvm"), the JVM DataSource V2 reader of segment files (java/pylog-spark),
# built by Maven against Spark 4.0 (provided) into a cache outside the repository;
# pylog.spark.jvm_jar() and tests/spark/test_spark_jvm_read.py find the jar there.
SPARK_JVM_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog/spark-jvm
SPARK_JVM_JAR := $(SPARK_JVM_CACHE)/pylog-spark.jar
SPARK_JVM_SRC := java/pylog-spark/pom.xml $(shell find java/pylog-spark/src -type f 2>/dev/null)

spark-jvm: $(SPARK_JVM_JAR) ## build format("pylog-jvm"), the JVM segment-file reader for Spark (java/pylog-spark), with Maven into ~/.cache/pylog/spark-jvm; skipped when up to date

$(SPARK_JVM_JAR): $(SPARK_JVM_SRC)
	rm -rf $(SPARK_JVM_CACHE)/build
	cd java/pylog-spark && mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(SPARK_JVM_CACHE)/m2 \
	  -Dpylog.build.dir=$(SPARK_JVM_CACHE)/build package
	cp $(SPARK_JVM_CACHE)/build/pylog-spark.jar $@
	@echo "spark jvm reader: $@"

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

# librdkafka's own test suite (its tests/ directory), built from Debian's
# source package of the version LIBRDKAFKA_SUITE ships, into a cache outside
# the repository; tests/integration/test_librdkafka_suite.py runs the tests
# tests/librdkafka/tests.txt lists against a pylog broker. apt-get reads the
# deb-src index through a private state directory under the cache, so the
# machine's apt configuration is left as it was.
LIBRDKAFKA_VERSION ?= 2.8.0
LIBRDKAFKA_SUITE   ?= trixie
LIBRDKAFKA_CACHE   := $(CLIENT_CACHE)/librdkafka-$(LIBRDKAFKA_VERSION)
LIBRDKAFKA_RUNNER  := $(LIBRDKAFKA_CACHE)/src/tests/test-runner
LIBRDKAFKA_APT      = -o Dir::Etc::SourceList=$(LIBRDKAFKA_CACHE)/apt/sources.list -o Dir::Etc::SourceParts=/dev/null \
  -o Dir::State::Lists=$(LIBRDKAFKA_CACHE)/apt/lists -o Dir::Cache=$(LIBRDKAFKA_CACHE)/apt/cache -o APT::Sandbox::User=root

librdkafka-tests: $(LIBRDKAFKA_RUNNER) ## build librdkafka's own test suite (Debian's librdkafka source) into ~/.cache/pylog/librdkafka-<version>; skipped when built

$(LIBRDKAFKA_RUNNER):
	@missing=""; for p in g++ make pkg-config zlib1g-dev libzstd-dev rapidjson-dev; do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	    $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; fi
	rm -rf $(LIBRDKAFKA_CACHE)/apt $(LIBRDKAFKA_CACHE)/src $(LIBRDKAFKA_CACHE)/dl
	mkdir -p $(LIBRDKAFKA_CACHE)/apt/lists/partial $(LIBRDKAFKA_CACHE)/apt/cache/archives/partial $(LIBRDKAFKA_CACHE)/dl
	echo "deb-src http://deb.debian.org/debian $(LIBRDKAFKA_SUITE) main" > $(LIBRDKAFKA_CACHE)/apt/sources.list
	apt-get $(LIBRDKAFKA_APT) update -qq
	cd $(LIBRDKAFKA_CACHE)/dl && apt-get $(LIBRDKAFKA_APT) source -qq --download-only librdkafka/$(LIBRDKAFKA_SUITE)
	@ls $(LIBRDKAFKA_CACHE)/dl/librdkafka_$(LIBRDKAFKA_VERSION).orig.tar.gz >/dev/null || \
	  { echo "Debian $(LIBRDKAFKA_SUITE) no longer has librdkafka $(LIBRDKAFKA_VERSION): $$(ls $(LIBRDKAFKA_CACHE)/dl)"; exit 1; }
	mkdir $(LIBRDKAFKA_CACHE)/src
	tar -xzf $(LIBRDKAFKA_CACHE)/dl/librdkafka_$(LIBRDKAFKA_VERSION).orig.tar.gz -C $(LIBRDKAFKA_CACHE)/src --strip-components=1
	@# no TLS, SASL or OIDC (their tests are skipped); zlib and zstd for the compression tests
	cd $(LIBRDKAFKA_CACHE)/src && ./configure --no-download --disable-ssl --disable-gssapi --disable-curl \
	  --enable-zlib --enable-zstd >$(LIBRDKAFKA_CACHE)/build.log 2>&1 || { tail -30 $(LIBRDKAFKA_CACHE)/build.log; exit 1; }
	$(MAKE) -C $(LIBRDKAFKA_CACHE)/src -j2 libs >>$(LIBRDKAFKA_CACHE)/build.log 2>&1 || { tail -30 $(LIBRDKAFKA_CACHE)/build.log; exit 1; }
	$(MAKE) -C $(LIBRDKAFKA_CACHE)/src/tests -j2 build >>$(LIBRDKAFKA_CACHE)/build.log 2>&1 || { tail -30 $(LIBRDKAFKA_CACHE)/build.log; exit 1; }
	rm -rf $(LIBRDKAFKA_CACHE)/apt $(LIBRDKAFKA_CACHE)/dl
	@echo "librdkafka $(LIBRDKAFKA_VERSION) test suite: $@"

test-rust: ## cargo test of the native core
	cargo test -q --workspace --exclude pylog-py

# The suite's files run on PYTEST_WORKERS processes (pytest-xdist), each file
# whole on one worker so its module fixtures (a cluster, a Kafka broker) are
# made once; most of a file's time is waiting on brokers, JVMs and clients.
# PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= 2

test-python: wheel ## pytest (real files, real segment bytes; tests/integration/test_wheel_install.py installs the wheel)
	PYLOG_WHEEL=$$(ls $(abspath $(WHEEL_DIR))/pylog_broker-*.whl) $(PY) -m pytest -q --durations=30 \
	  -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

test-spark-cluster: install tools ## the exactly-once Spark tests on a Spark standalone cluster (a master and two workers) against three pylog brokers, killing an executor, the driver and a broker (~10 min; not in make test)
	PYLOG_SPARK_CLUSTER_TESTS=1 $(PY) -m pytest -q tests/spark/test_spark_exactly_once.py

# ---------------------------------------------------------------- the wheel users install
# abi3 (one wheel for every CPython >= 3.10), linked by zig against glibc 2.17
# (manylinux2014) so RHEL 8, Ubuntu 20.04 and Debian 11 install it; a plain
# `maturin build` links against this machine's glibc and tags the wheel with
# that. WHEEL_TARGET=aarch64-unknown-linux-gnu cross-builds the ARM wheel the
# same way (the wheels workflow builds both). Cargo builds in ./target.
WHEEL_TARGET ?= x86_64-unknown-linux-gnu
WHEEL_DIR    := target/wheels/$(WHEEL_TARGET)
WHEEL        := $(WHEEL_DIR)/.built
WHEEL_TOOLS  := $(VENV)/.wheel-tools
PY_SRC := $(shell find python/pylog -name '*.py' -o -name '*.pyi' -o -name '*.json' -o -name '*.html' -o -name '*.css' -o -name py.typed)

$(WHEEL_TOOLS): $(STAMP)
	$(PIP) install -q "ziglang>=0.13" "auditwheel>=6"
	touch $@

# $(WHEEL) stamps the one wheel in $(WHEEL_DIR), so make can tell when it is stale.
# It carries format("pylog-jvm")'s jar (copied next to pylog.spark, where
# pylog.spark.jvm_jar() finds it in an installed wheel; not committed).
$(WHEEL): $(WHEEL_TOOLS) $(NATIVE_SRC) $(PY_SRC) README.md $(SPARK_JVM_JAR)
	@rustup target list --installed 2>/dev/null | grep -qx $(WHEEL_TARGET) || rustup target add $(WHEEL_TARGET)
	cp $(SPARK_JVM_JAR) python/pylog/spark/pylog-spark.jar
	rm -rf $(WHEEL_DIR)
	PATH="$(abspath $(VENV))/bin:$$PATH" VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin build -q --release \
	  --zig --compatibility manylinux2014 --target $(WHEEL_TARGET) --out $(WHEEL_DIR)
	@# auditwheel reads the symbols the extension needs: none newer than glibc 2.17
	$(VENV)/bin/auditwheel show $(WHEEL_DIR)/pylog_broker-*.whl | tr -d '\n' | grep -q 'consistent with the following platform tag: *"manylinux_2_17_' \
	  || { $(VENV)/bin/auditwheel show $(WHEEL_DIR)/pylog_broker-*.whl; echo "not manylinux2014"; exit 1; }
	@ls $(WHEEL_DIR)/pylog_broker-*.whl
	touch $@

wheel: $(WHEEL) ## build the abi3 manylinux2014 wheel users install (zig, glibc 2.17) into target/wheels/, checked by auditwheel

# ---------------------------------------------------------------- pylog.spark on other PySparks
# The oldest and the newest PySpark pylog.spark supports, each in a cached
# virtualenv outside the repository with the wheel above installed; one whose
# minor version the main venv runs is left out (test-python covered it).
# Raise SPARK_NEWEST when PySpark releases a new minor version.
SPARK_OLDEST ?= 4.0
SPARK_NEWEST ?= 4.3
SPARK_CACHE  := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog
SPARK_COMPAT_TESTS := tests/spark/test_spark_options.py \
  "tests/spark/test_spark_jvm_read.py::test_rows_equal_format_pylog_for_every_codec[lz4]" \
  "tests/spark/test_spark_jvm_read.py::test_requested_columns_only" \
  "tests/spark/test_spark_jvm_read.py::test_read_committed_equals_a_kafka_consumer" \
  "tests/spark/test_spark_jvm_read.py::test_streaming_read_committed_waits_at_the_lso" \
  "tests/spark/test_spark_read.py::test_the_arrow_schema_is_the_one_spark_derives" \
  "tests/spark/test_spark_read.py::test_rows_equal_what_was_produced_for_every_codec[zstd]" \
  "tests/spark/test_spark_read.py::test_offset_and_timestamp_ranges_and_splits" \
  "tests/spark/test_spark_read.py::test_a_schema_of_some_kafka_columns_reads_only_those" \
  "tests/spark/test_spark_stream_write.py::test_streaming_picks_up_new_records_and_resumes_from_a_checkpoint[wire]" \
  "tests/spark/test_spark_stream_write.py::test_batch_write_round_trips" \
  "tests/spark/test_spark_stream_write.py::test_streaming_write_copies_a_topic" \
  "tests/spark/test_spark_stream_write.py::test_udfs_decode_and_validate_segment_bytes" \
  "tests/spark/test_spark_kafka_connector.py::test_batch_read_equals_format_pylog" \
  "tests/spark/test_spark_kafka_connector.py::test_streaming_write_copies_a_topic"

# dependencies once per venv (pyspark's own pins bring its pandas and pyarrow),
# again only when the Makefile or pyproject.toml change
$(SPARK_CACHE)/venv-pyspark-%/.installed: pyproject.toml Makefile | $(WHEEL)
	$(PYTHON) -m venv $(@D)
	$(@D)/bin/python -m pip install -q --upgrade pip
	$(@D)/bin/python -m pip install -q "$$(ls $(abspath $(WHEEL_DIR))/pylog_broker-*.whl)[spark,test]" "pyspark==$*.*"
	touch $@

spark-compat: $(WHEEL) $(SPARK_CACHE)/venv-pyspark-$(SPARK_OLDEST)/.installed $(SPARK_CACHE)/venv-pyspark-$(SPARK_NEWEST)/.installed ## the Spark tests' read, stream and write parts on the oldest and newest PySpark pylog.spark supports
	@main=$$($(PY) -c 'import pyspark; print(".".join(pyspark.__version__.split(".")[:2]))' 2>/dev/null); \
	for v in $(SPARK_OLDEST) $(SPARK_NEWEST); do \
	  if [ "$$v" = "$$main" ]; then echo "PySpark $$v: the main venv's, run by test-python"; continue; fi; \
	  venv=$(SPARK_CACHE)/venv-pyspark-$$v; \
	  $$venv/bin/python -m pip install -q --force-reinstall --no-deps $(WHEEL_DIR)/pylog_broker-*.whl || exit 1; \
	  echo "PySpark $$($$venv/bin/python -c 'import pyspark; print(pyspark.__version__)'):"; \
	  env -u PYTHONPATH $$venv/bin/python -m pytest -q -p no:cacheprovider $(SPARK_COMPAT_TESTS) || exit 1; \
	done

# Spark's own Kafka connector (spark-sql-kafka-0-10) for the main venv's PySpark and
# spark-compat's, copied by Maven into $(SPARK_CACHE)/spark-kafka/pyspark-<version>
# (tests/spark/kafka/fetch.py); tests/spark_support.py puts it on spark.jars.
spark-kafka: install $(SPARK_CACHE)/venv-pyspark-$(SPARK_OLDEST)/.installed $(SPARK_CACHE)/venv-pyspark-$(SPARK_NEWEST)/.installed ## fetch Spark's Kafka connector for each PySpark the tests run into ~/.cache/pylog/spark-kafka; skipped when there
	@for py in $(PY) $(SPARK_CACHE)/venv-pyspark-$(SPARK_OLDEST)/bin/python $(SPARK_CACHE)/venv-pyspark-$(SPARK_NEWEST)/bin/python; do \
	  $(PY) tests/spark/kafka/fetch.py $$py || exit 1; done

bench: install ## print the performance figures and their ratios against same-run baselines
	cargo bench -q -p pylog-core -- --warm-up-time 1 --measurement-time 3
	$(PY) -m pytest -q bench --benchmark-columns=mean,median,ops --benchmark-sort=name
	$(PY) bench/storage_bench.py
	$(PY) bench/broker_bench.py
	$(PY) bench/group_bench.py
	$(PY) bench/hostile_request_bench.py
	$(PY) bench/tls_bench.py
	$(PY) bench/cleaner_bench.py
	$(PY) bench/cluster_bench.py
	@$(MAKE) --no-print-directory kafka || echo "kafka_peer: skipped, Apache Kafka could not be fetched with Maven (see above)"
	@$(PY) tests/spark/kafka/fetch.py $(PY) || echo "spark_bench: no Spark Kafka connector could be fetched (see above)"
	$(PY) bench/spark_bench.py
	$(PY) bench/kafka_peer.py --skip-if-missing
	$(PY) bench/kafka_peer.py --skip-if-missing --cluster

# Apache Kafka, the peer of bench/kafka_peer.py: its broker and its perf tools with their
# runtime dependencies, copied by Maven into a cache outside the repository (nothing is
# built, nothing of Kafka is committed). The version is the one bench/kafka/pom.xml names.
KAFKA_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' bench/kafka/pom.xml)
KAFKA_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog/kafka-$(KAFKA_VERSION)
KAFKA_STAMP := $(KAFKA_CACHE)/libs/.complete

kafka: $(KAFKA_STAMP) ## fetch Apache Kafka (broker + perf tools, bench/kafka/pom.xml) with Maven into ~/.cache/pylog/kafka-<version>; skipped when there

$(KAFKA_STAMP): bench/kafka/pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "make kafka: needs Maven and a JDK (apt-get install maven)"; exit 1; }
	rm -rf $(KAFKA_CACHE)/libs $(KAFKA_CACHE)/libs.tmp
	cd bench/kafka && mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(KAFKA_CACHE)/m2 \
	  -Dkafka.lib.dir=$(KAFKA_CACHE)/libs.tmp package
	mv $(KAFKA_CACHE)/libs.tmp $(KAFKA_CACHE)/libs
	touch $@
	@echo "Apache Kafka $(KAFKA_VERSION): $(KAFKA_CACHE)/libs"

# Apache Kafka 3.9, the last line with ZooKeeper mode: the Kafka brokers of the
# mixed-cluster tests (tests/kafka39.py, tests/integration/test_mixed_cluster.py),
# beside pylog brokers on one ZooKeeper. Its broker jars with their runtime
# dependencies, copied by Maven into a cache outside the repository (nothing built,
# nothing of Kafka committed); tests/kafka39/pom.xml names the version.
KAFKA39_VERSION := $(shell sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' tests/kafka39/pom.xml)
KAFKA39_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog/kafka-$(KAFKA39_VERSION)
KAFKA39_STAMP := $(KAFKA39_CACHE)/libs/.complete

kafka39: $(KAFKA39_STAMP) ## fetch Apache Kafka 3.9 (ZooKeeper mode, tests/kafka39/pom.xml) with Maven into ~/.cache/pylog/kafka-<version>, for the mixed-cluster tests; skipped when there

$(KAFKA39_STAMP): tests/kafka39/pom.xml
	@command -v mvn >/dev/null 2>&1 || { echo "make kafka39: needs Maven and a JDK (apt-get install maven)"; exit 1; }
	rm -rf $(KAFKA39_CACHE)/libs $(KAFKA39_CACHE)/libs.tmp
	cd tests/kafka39 && mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(KAFKA39_CACHE)/m2 \
	  -Dkafka.lib.dir=$(KAFKA39_CACHE)/libs.tmp package
	rm -rf tests/kafka39/target
	mv $(KAFKA39_CACHE)/libs.tmp $(KAFKA39_CACHE)/libs
	touch $@
	@echo "Apache Kafka $(KAFKA39_VERSION): $(KAFKA39_CACHE)/libs"

# Kafka Streams (tests/kafka-streams: a word-count program) and Kafka Connect
# (its standalone worker and file connectors, no code of ours), built and
# copied by Maven with every runtime jar into a cache outside the repository;
# tests/kafka_streams_connect.py finds them there. Skipped when up to date.
STREAMS_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/pylog/streams-connect-$(KAFKA_VERSION)
STREAMS_JAR   := $(STREAMS_CACHE)/build/pylog-kafka-streams.jar
STREAMS_SRC   := tests/kafka-streams/pom.xml $(shell find tests/kafka-streams/src -type f 2>/dev/null)

kafka-streams-connect: $(STREAMS_JAR) ## build tests/kafka-streams (word count) and fetch Kafka Streams and Connect with Maven into ~/.cache/pylog/streams-connect-<version>

$(STREAMS_JAR): $(STREAMS_SRC)
	rm -rf $(STREAMS_CACHE)/build
	cd tests/kafka-streams && mvn -q -B -Dstyle.color=never -Dmaven.repo.local=$(STREAMS_CACHE)/m2 \
	  -Dkafka.version=$(KAFKA_VERSION) -Dpylog.build.dir=$(STREAMS_CACHE)/build package
	@echo "kafka streams and connect: $(STREAMS_CACHE)/build"

FUZZ_SECONDS ?= 60
FUZZ_TARGETS := batch records decompress

SOAK_SECONDS ?= 3600
# The soak's broker logs and segments stay in SOAK_DIR until the next soak
# (pytest's own temporary directories rotate away after three runs).
SOAK_DIR ?= /tmp/pylog-soak

soak: install tools ## the partition suite's random faults for SOAK_SECONDS (3600) on three brokers (tests/integration/test_network_partitions.py; SOAK_SEED repeats a schedule; logs kept in SOAK_DIR)
	PYLOG_SOAK_SECONDS=$(SOAK_SECONDS) PYLOG_SOAK_SEED=$(SOAK_SEED) $(PY) -m pytest -q -s \
	  tests/integration/test_network_partitions.py -k soak -p no:cacheprovider --basetemp=$(SOAK_DIR)

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
