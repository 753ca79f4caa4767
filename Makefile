# baremesh: the two commands are `make run` and `make test` (see README.md).
GO        ?= go
BIN       := bin
VERSION   ?= $(shell cat VERSION 2>/dev/null || echo 0.1.0)
LDFLAGS   := -X github.com/baremesh/baremesh/internal/version.Version=$(VERSION)
HTTP_ADDR ?= 127.0.0.1:15014
XDS_ADDR  ?= 127.0.0.1:15010
EXAMPLE   ?= examples/vm-mesh

.PHONY: all build run test test-deps bench fmt vet clean package parity flake chaos

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

# run builds only baremeshd (the first build downloads and compiles the
# modules it needs: a few minutes on 2 cores; later builds take seconds).
run:
	@mkdir -p $(BIN)
	@test -x $(BIN)/baremeshd || echo "make run: first build of baremeshd (downloads and compiles its modules; a few minutes on 2 cores)"
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/baremeshd
	$(BIN)/baremeshd --config $(EXAMPLE)/baremesh.yaml --xds-addr $(XDS_ADDR) --http-addr $(HTTP_ADDR) --log-level info

# test-deps installs what the tests need (apt packages, npm packages, tools
# from the Go module proxy). Each file in hack/deps.d owns one capability's
# needs and is idempotent.
test-deps:
	hack/test-deps.sh

# hack/test.sh runs go vet and staticcheck (unused names, deprecated Envoy
# and gRPC fields, simplifications; pinned, installed from the Go module
# proxy) beside go test -race, which runs TEST_P packages at once (default
# 4: the long packages wait on processes much of the time); the checkers'
# findings are printed at the end. hack/heartbeat.sh prints a line a
# minute while a step runs (what is being compiled or which test binaries
# are running); it changes nothing of what runs.
STATICCHECK_VERSION ?= v0.8.2
TEST_P              ?= 4

test: test-deps
	GO=$(GO) STATICCHECK_VERSION=$(STATICCHECK_VERSION) TEST_P=$(TEST_P) hack/test.sh

# flake runs packages N times with -race -count=1 while a CPU hog keeps
# every core busy, with a progress line each minute and a summary of the
# failures by test (hack/flake.sh). PKG (default: the suite minus the long
# scenario/load packages), N (default 3), RUN and SKIP (-run, -skip), HOG.
flake:
	PKG='$(PKG)' N='$(N)' RUN='$(RUN)' SKIP='$(SKIP)' HOG='$(HOG)' hack/flake.sh

# chaos runs the fleet under faults (internal/chaos; root, iproute2,
# iptables): three baremeshd in network namespaces, proxies on the TLS
# port, partition, kill -9 loop, full state disk, restart of all three,
# then these overlapping, and prints the chaos table. make test runs its short form (60 proxies,
# two kills, about a minute); this is the full form: 5,000 proxies, a
# kill -9 every 30 s for 5 minutes (CHAOS_PROXIES to change the number),
# and the rolling upgrade from the previous release (TestRollingUpgrade).
CHAOS_REPORT ?= $(or $(TMPDIR),/tmp)/baremesh-chaos-report.txt
chaos:
	CHAOS_FULL=1 CHAOS_REPORT=$(CHAOS_REPORT) UPGRADE_REPORT=$(CHAOS_REPORT).upgrade $(GO) test -count=1 -timeout 60m -run '^(TestChaos|TestRollingUpgrade)$$' -v ./internal/chaos/; rc=$$?; \
	  cat $(CHAOS_REPORT) $(CHAOS_REPORT).upgrade 2>/dev/null; exit $$rc

# bench prints the figures the issues ask for (see README.md, "Benchmarks")
# in bounded time, with a line a minute saying what runs
# (hack/heartbeat.sh) and the wall time at the end. Every benchmark runs
# once (BENCHTIME=1x): the scenario benchmarks measure one-off events (a
# connect storm, a full push, a failover) and log their spread
# themselves, and BenchmarkScale and BenchmarkIstiodSideBySide (issue
# #30's table, istiod beside baremeshd) run once per mode at any count;
# BENCHTIME=3x is the longer form make bench ran before (each benchmark
# once, then again for three iterations). The per-proxy generation
# benchmark (microseconds per op) runs 200 times per case so its ns/op is
# stable. BENCH_QUICK=1 runs only issue #30's side-by-side table and the
# write -> push start benchmark. BENCH_TIMEOUT bounds each package.
BENCHTIME     ?= 1x
BENCH_TIMEOUT ?= 40m
BENCH_QUICK   ?=
bench:
	@start=$$(date +%s); \
	if [ -n "$(BENCH_QUICK)" ]; then \
	  hack/heartbeat.sh "make bench (quick)" $(GO) test -run '^$$' -bench '^(BenchmarkIstiodSideBySide|BenchmarkWriteToPush)$$' -benchmem -benchtime 1x -timeout $(BENCH_TIMEOUT) ./internal/load/; \
	else \
	  hack/heartbeat.sh "make bench" $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -timeout $(BENCH_TIMEOUT) $$($(GO) list ./... | grep -v /xdsserver/gen/bench) && \
	  hack/heartbeat.sh "make bench: generation" $(GO) test -run '^$$' -bench . -benchmem -benchtime 200x -timeout $(BENCH_TIMEOUT) ./xdsserver/gen/bench/; \
	fi; rc=$$?; \
	echo "make bench: $$(( ($$(date +%s) - start) / 60 )) min $$(( ($$(date +%s) - start) % 60 )) s (load average $$(cut -d' ' -f1-3 /proc/loadavg))"; exit $$rc

# parity compares baremesh's xDS with istiod's for the same config and
# proxies (internal/parity: every scenario untrimmed) and prints the report
# (scenarios × proxies, resources compared, equal / in the catalog / open /
# unexplained). make test runs the same test with trimmed scenarios.
PARITY_REPORT ?= $(or $(TMPDIR),/tmp)/baremesh-parity-report.txt
parity:
	rm -f $(PARITY_REPORT)
	PARITY_FULL=1 PARITY_REPORT=$(PARITY_REPORT) $(GO) test -count=1 -timeout 60m -run '^TestParity$$' ./internal/parity/; rc=$$?; \
	  test -f $(PARITY_REPORT) && cat $(PARITY_REPORT); exit $$rc

# package writes the baremesh and baremesh-agent .deb and .rpm into
# $(DIST) with nfpm (packaging/*.yaml, systemd/; README.md, "Packages").
NFPM_VERSION ?= v2.44.1
NFPM         ?= $(shell $(GO) env GOPATH)/bin/nfpm
ARCH         ?= $(shell $(GO) env GOARCH)
DIST         ?= dist
PKG_ROOT     := $(DIST)/.root
PKG_CMDS     := ./cmd/baremeshd ./cmd/baremeshctl ./cmd/baremesh-agent $(if $(wildcard cmd/baremesh-cni),./cmd/baremesh-cni)

package:
	@test -x $(NFPM) || $(GO) install github.com/goreleaser/nfpm/v2/cmd/nfpm@$(NFPM_VERSION)
	rm -rf $(PKG_ROOT) && mkdir -p $(PKG_ROOT)/doc
	CGO_ENABLED=0 GOOS=linux GOARCH=$(ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS) -s -w' -o $(PKG_ROOT)/ $(PKG_CMDS)
	cp packaging/doc/copyright $(PKG_ROOT)/doc/
	for m in packaging/man/*.[18]; do gzip -9n < $$m > $(PKG_ROOT)/doc/$$(basename $$m).gz || exit 1; done
	for p in baremesh baremesh-agent; do \
	  packaging/changelog.sh $$p $(VERSION) | gzip -9n > $(PKG_ROOT)/doc/$$p.changelog.gz || exit 1; \
	  for f in deb rpm; do \
	    VERSION=$(VERSION) ARCH=$(ARCH) PKG_ROOT=$(PKG_ROOT) $(NFPM) package -f packaging/$$p.yaml -p $$f -t $(DIST)/ || exit 1; \
	  done; \
	done
	@ls -l $(DIST)/*$(VERSION)*.deb $(DIST)/*$(VERSION)*.rpm

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
