# exprd: `make run` starts the service with the demo, `make test` runs every test.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-print-directory

BIN := $(abspath bin)
export PATH := $(BIN):$(PATH)
export GOBIN := $(BIN)

BUF_VERSION := 1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.2
STATICCHECK_VERSION := v0.8.2
GRPCURL_VERSION := v1.9.4
INSPECTOR_VERSION := 2.12.0

ADDR ?= :50051

.PHONY: help
help: ## Describe useful make targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "%-16s %s\n", $$1, $$2}'

.PHONY: run
run: ## Start exprd with the embedded demo on $(ADDR)
	go run ./cmd/exprd --demo --listen $(ADDR)

# Modules of their own, so that their dependencies (cel-go, goja, gonum
# plot; kustomize, k8s.io/api; etcd's server) never become exprd's.
NESTED_MODULES := bench deploy cluster

# exprd as the image builds it (static, -trimpath); the tests that start a
# real exprd take it from EXPRD_BIN instead of each building their own.
EXPRD_BUILD := CGO_ENABLED=0 go build -trimpath

.PHONY: test
test: $(BIN)/grpcurl $(BIN)/jq $(BIN)/mcp-inspector ## Run every test: exprd's with the race detector (the README's tour among them, with grpcurl and the MCP Inspector), then the bench, deploy and cluster modules'
	$(EXPRD_BUILD) -o $(BIN)/exprd ./cmd/exprd
	EXPRD_BIN=$(BIN)/exprd go test -race -count=1 ./...
	for m in $(NESTED_MODULES); do (cd $$m && EXPRD_BIN=$(BIN)/exprd go test -count=1 ./...); done

BENCH_COUNT ?= 5

.PHONY: bench-cluster
bench-cluster: ## Replicas on a real etcd: a tool call against the in-memory registry, and propagation p50/p99
	$(EXPRD_BUILD) -o $(BIN)/exprd ./cmd/exprd
	cd cluster && EXPRD_BIN=$(BIN)/exprd go test -run '^$$' -bench 'ToolCall|Propagation' -benchtime 2000x -count $(BENCH_COUNT)

.PHONY: bench-turns
bench-turns: ## Durable turns: a turn with a 50 ms model through JetStream vs in memory, -count 10: its ratio with benchstat's 95% interval (goal 1.05x), and events a second one replica records; then the takeover time after a SIGKILL, p50/p99 over 300 turns (about 2 minutes)
	$(EXPRD_BUILD) -o $(BIN)/exprd ./cmd/exprd
	cd cluster && EXPRD_BIN=$(BIN)/exprd go test -run '^$$' -bench '^BenchmarkTurnStore$$' -benchtime 30x -count 10 | tee $(BENCH_TURNS_OUT)
	cd bench && go run ./cmd/benchreport --intervals $(BENCH_TURNS_OUT)
	cd cluster && EXPRD_BIN=$(BIN)/exprd go test -run '^$$' -bench '^BenchmarkTakeover$$' -benchtime 15x -count 1

BENCH_TURNS_OUT ?= $(abspath bench/results/turns.txt)

.PHONY: bench-mcp
bench-mcp: ## A warm MCP tool call through the registry vs a bare go-sdk client, -count 10: its ratio with benchstat's 95% interval, met only when the interval is under the goal
	go test ./utcp/mcptransport -run '^$$' -bench '^BenchmarkCall$$' -count 10 | tee $(BENCH_MCP_OUT)
	cd bench && go run ./cmd/benchreport --intervals $(BENCH_MCP_OUT)

BENCH_MCP_OUT ?= $(abspath bench/results/mcp.txt)

INFLIGHT_N ?= 100,1000,10000

.PHONY: bench-inflight
bench-inflight: ## AgentLoop turns in flight at once (INFLIGHT_N) on a real exprd vs xsai's generateText in one node, the model streaming 50 deltas 20 ms apart: memory and CPU per turn, a text delta's added latency, exprd's heap and goroutines per turn; writes bench/results/turnsinflight.json and benchmarks-inflight.png (about 2 minutes, both cores)
	$(EXPRD_BUILD) -o $(BIN)/exprd ./cmd/exprd
	test -d bench/xsai/node_modules/xsai || (cd bench/xsai && npm ci --no-audit --no-fund)
	cd bench && timeout 20m go run ./cmd/turnsinflight --module .. --exprd-bin $(BIN)/exprd --n $(INFLIGHT_N) --json results/turnsinflight.json --plot ../benchmarks-inflight.png

.PHONY: bench
bench: ## Run every benchmark against its baseline and peers; writes BENCHMARKS.md's tables and benchmarks-scale.png, then the turns in flight (bench-inflight: its JSON and benchmarks-inflight.png)
	cd bench && go run ./cmd/benchreport --module .. --count $(BENCH_COUNT)
	$(MAKE) bench-inflight

FUZZTIME ?= 10s
FUZZPKGS ?= ./...

.PHONY: fuzz
fuzz: ## Run every fuzz target of FUZZPKGS for FUZZTIME each (seeds in testdata/)
	FUZZTIME=$(FUZZTIME) FUZZPKGS='$(FUZZPKGS)' scripts/fuzz

LOAD_DURATION ?= 60s
LOAD_STREAMS ?= 200
LOAD_IDLE ?= 10000

.PHONY: loadtest
loadtest: ## Load a local exprd: LOAD_STREAMS streams for LOAD_DURATION, then LOAD_IDLE idle sessions
	$(EXPRD_BUILD) -o $(BIN)/exprd ./cmd/exprd
	cd bench && go build -o $(BIN)/exprd-load ./cmd/exprd-load
	$(BIN)/exprd-load --exprd $(BIN)/exprd --streams $(LOAD_STREAMS) --duration $(LOAD_DURATION) --idle $(LOAD_IDLE)

.PHONY: loadtest-short
loadtest-short: ## The 10-second load test CI runs
	$(MAKE) loadtest LOAD_DURATION=10s LOAD_IDLE=2000

HOSTILE_FLAGS ?=

.PHONY: loadtest-hostile
loadtest-hostile: ## Hostile load on a local exprd (auth on, --memory-budget 256 MiB), each case then all at once; fails unless each holds its bounds (memory, cores, typed answers, the steady p99 under a second, right answers) and the goal (the steady p99 within 5x its quiet baseline); writes BENCHMARKS.md's section (HOSTILE_FLAGS="--short --bounds-only --cases 1,...,14": under a minute, printed only, the bounds alone, as CI runs it)
	$(EXPRD_BUILD) -o $(BIN)/exprd ./cmd/exprd
	cd bench && go build -o $(BIN)/exprd-hostile ./cmd/exprd-hostile
	$(BIN)/exprd-hostile --exprd $(BIN)/exprd --benchmarks BENCHMARKS.md $(HOSTILE_FLAGS)

.PHONY: generate
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc ## Regenerate gen/ from proto/
	rm -rf gen
	buf generate
	buf format -w

# The API as last agreed: `buf breaking` compares proto/ with it, so that
# a change that would break a client fails CI. A break made on purpose (before
# v1 only) rewrites it with `make api-baseline`, and the diff shows it.
API_BASELINE := proto/api-baseline.json

.PHONY: api-baseline
api-baseline: $(BIN)/buf ## Record proto/ as the API that buf breaking checks against (a deliberate break, before v1)
	buf build -o $(API_BASELINE)

.PHONY: checkgenerate
checkgenerate: ## Fail when proto/ is not lint clean, breaks the recorded API, or gen/ is not current
	$(MAKE) generate
	buf lint
	buf breaking --against $(API_BASELINE)
	@if [ -n "$$(git status --porcelain -- gen proto)" ]; then \
		git status --porcelain -- gen proto; \
		echo "gen/ or proto/ is not current: run make generate and commit" >&2; exit 1; fi

.PHONY: lint
lint: $(BIN)/buf $(BIN)/staticcheck ## Run buf lint, gofmt, go vet and staticcheck
	buf lint
	buf format -d --exit-code
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '^gen/'); exit 1; }
	go vet ./...
	staticcheck ./...
	for m in $(NESTED_MODULES); do (cd $$m && go vet ./... && staticcheck ./...); done

.PHONY: tools
tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/staticcheck $(BIN)/grpcurl $(BIN)/jq $(BIN)/mcp-inspector ## Install the pinned tools into ./bin

$(BIN)/buf:
	@mkdir -p $(BIN)/npm
	npm install --silent --no-save --no-audit --no-fund --prefix $(BIN)/npm @bufbuild/buf@$(BUF_VERSION)
	ln -sf npm/node_modules/.bin/buf $@

# The MCP Inspector (@modelcontextprotocol/inspector), whose CLI mode
# (mcp-inspector --cli URL --transport http) the README's tour runs against
# the demo's MCP endpoint. 2.12.0, the latest, declares engines node>=22.19,
# as every release since 0.16 declares node>=22 (0.16 to 1.0.3: >=22.7.5);
# its CLI runs on Node 20.20, as CI has, for tools/list and tools/call at
# 2025-11-25 (its default for a URL) and 2026-07-28 (--protocol-era modern);
# 0.22.0 and 1.0.3 ran too, 1.x printing a deprecation banner. Its own
# prefix, not buf's: an npm install --no-save removes what the prefix held.
$(BIN)/mcp-inspector:
	@mkdir -p $(BIN)/npm-inspector
	npm install --silent --no-save --no-audit --no-fund --prefix $(BIN)/npm-inspector @modelcontextprotocol/inspector@$(INSPECTOR_VERSION)
	ln -sf npm-inspector/node_modules/.bin/mcp-inspector $@

$(BIN)/protoc-gen-go:
	go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

$(BIN)/protoc-gen-go-grpc:
	go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)

$(BIN)/staticcheck:
	go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(BIN)/grpcurl:
	go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

# jq, for the README's tour and the docs' examples: the machine's when it
# has one, else Debian's (jq, libjq1, libonig5) unpacked into ./bin without
# root. (gojq, which go install could bring, sorts the keys of what it
# prints and cannot flush line by line, which the examples show and need.)
$(BIN)/jq:
	@mkdir -p $(BIN)
	if command -v jq >/dev/null; then ln -sf "$$(command -v jq)" $@; else \
		rm -rf $(BIN)/jq-deb && mkdir -p $(BIN)/jq-deb && \
		(cd $(BIN)/jq-deb && apt-get download jq libjq1 libonig5 && for d in *.deb; do dpkg-deb -x $$d root; done) && \
		printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$$@"\n' $(BIN)/jq-deb/root/usr/lib/x86_64-linux-gnu $(BIN)/jq-deb/root/usr/bin/jq > $@ && \
		chmod +x $@; fi
