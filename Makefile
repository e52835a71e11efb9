# skiff — build, run and test on a Debian machine (as root for deps and run).
SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
export CGO_ENABLED := 1
# The embedded containerd leaves out what skiff does not use: the CRI plugin
# (skiff drives containerd directly) and snapshotters this kernel lacks.
export GOFLAGS := -tags=no_cri,no_btrfs,no_devmapper,no_zfs

GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
# containerd reports its own version (the embedded daemon) as its release.
LDFLAGS := -X main.buildVersion=$(VERSION) -X main.buildCommit=$(COMMIT) -X github.com/containerd/containerd/v2/version.Version=2.4.2
# Debian packages the build, the agent and the tests need: runc runs
# containers for the embedded containerd; Debian's containerd serves the
# --container-runtime-endpoint tests; busybox-static is the test image;
# iproute2 makes the test hosts (network namespaces); nftables only lets a
# person read the rules (skiff writes them over netlink).
DEB_PACKAGES := gcc libc6-dev git ca-certificates runc containerd busybox-static iproute2 nftables
DATA_DIR ?= /var/lib/skiff
TEST_TIMEOUT ?= 40m

.PHONY: all build deps run test bench bench-kine bench-api bench-crd bench-admission conformance lint clean

all: build

## deps: install the Debian packages that are missing (needs root and apt)
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@command -v $(GO) >/dev/null || { echo "Go 1.26 or newer is needed at /usr/local/go/bin or on PATH"; exit 1; }

SHIM := runtime/daemon/shimbin/containerd-shim-runc-v2

## build: bin/skiff (cgo for SQLite, version stamped), carrying containerd's
## runc shim built as its own small binary (a shim runs per container)
build:
	$(GO) build -trimpath -ldflags '-s -w' -o $(SHIM) github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2
	$(GO) build -trimpath -tags no_cri,no_btrfs,no_devmapper,no_zfs,embedshim -ldflags '$(LDFLAGS)' -o bin/skiff .

## run: install what is missing, build, and start a single-node server
run: deps build
	./bin/skiff server --data-dir $(DATA_DIR)

# A count, not a duration: a duration -fuzztime races Go's fuzz
# coordinator shutdown on a loaded machine and fails with a bare "context
# deadline exceeded" and no crasher (golang/go#75804, fixed in Go 1.27).
# 10,000 inputs take about 20 s here.
FUZZ_TIME ?= 10000x

## test: install what is missing, then every test (race detector on), then
## a bounded fuzz run of the API server's decode, validate and patch paths
test: deps lint build
	SKIFF_BIN=$(CURDIR)/bin/skiff $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...
	$(GO) test -run '^$$' -fuzz '^FuzzCreate_NeverPanics$$' -fuzztime $(FUZZ_TIME) ./server/apiserver/
	$(GO) test -run '^$$' -fuzz '^FuzzPatch_NeverPanics$$' -fuzztime $(FUZZ_TIME) ./server/apiserver/

## bench: the store benchmarks, then kine's through the same operations
bench: deps
	$(GO) test -run '^$$' -bench . -benchtime 2s ./store/sqlite
	$(MAKE) bench-kine

## bench-api: the API server under client-go load (e2e/bench/run.sh)
## (bench-api, bench-crd, bench-admission: BENCH_ARGS="flags" replaces the load client's defaults)
bench-api: build
	SKIFF_BIN=$(CURDIR)/bin/skiff e2e/bench/run.sh $(BENCH_ARGS)

## bench-crd: custom resources against ConfigMaps (e2e/bench/crd.sh)
bench-crd: build
	SKIFF_BIN=$(CURDIR)/bin/skiff e2e/bench/crd.sh $(BENCH_ARGS)

## bench-admission: ConfigMap creates under webhooks, a policy and a quota (e2e/bench/admission.sh)
bench-admission: build
	SKIFF_BIN=$(CURDIR)/bin/skiff e2e/bench/admission.sh $(BENCH_ARGS)

## conformance: upstream Kubernetes v1.37.2 [Conformance] tests on a fresh
## two-node cluster (server + agent in network namespaces), summary by SIG.
## Not part of make test: the first run builds e2e.test (15-40 min), a full run
## takes over an hour. FOCUS=regex SKIP=regex PROCS=n TIMEOUT=min SERIAL=0|1
conformance: deps build
	e2e/conformance/conformance.sh

bench-kine:
	cd store/sqlite/kinebench && $(GO) test -mod=mod -run '^$$' -bench . -benchtime 2s .

## lint: gofmt and go vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

clean:
	rm -rf bin
