# baremesh: the two commands are `make run` and `make test` (see README.md).
GO        ?= go
BIN       := bin
VERSION   ?= $(shell cat VERSION 2>/dev/null || echo 0.1.0)
LDFLAGS   := -X github.com/baremesh/baremesh/internal/version.Version=$(VERSION)
HTTP_ADDR ?= 127.0.0.1:15014
XDS_ADDR  ?= 127.0.0.1:15010
EXAMPLE   ?= examples/vm-mesh

.PHONY: all build run test test-deps bench fmt vet clean

all: build

build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

run: build
	$(BIN)/baremeshd --config-dir $(EXAMPLE) --xds-addr $(XDS_ADDR) --http-addr $(HTTP_ADDR) --log-level info

# test-deps installs what the tests need (apt packages, npm packages, tools
# from the Go module proxy). Each file in hack/deps.d owns one capability's
# needs and is idempotent.
test-deps:
	hack/test-deps.sh

test: test-deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

# bench prints the figures the issues ask for (see README.md, "Benchmarks").
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 3x -timeout 60m ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)
