# goverbs: make test runs everything; make demo shows soft-RoCE in a VM.
# Every target installs what it needs with apt-get when it is missing.

GO          ?= go
export CGO_ENABLED := 0
# -trimpath keeps the checkout's directory out of what go builds, and so out
# of the build cache's keys: a fresh clone of a commit this machine has
# built before compiles nothing again (make test from a clone: CI).
export GOFLAGS := -trimpath $(GOFLAGS)
# Where go builds and runs its binaries: $GOTMPDIR, $TMPDIR or /tmp where
# the host lets a program there run, else a directory in the goverbs cache
# (test/host.sh tmpdir). Found once per make.
export GOTMPDIR := $(shell sh test/host.sh tmpdir)

# The VM matrix of make test: kernel/arch pairs booted under QEMU (TCG).
VMS         ?= 6.1/amd64,6.12/amd64,6.1/arm64,6.12/arm64
# make vmtest KERNEL=6.12 ARCH=arm64 RUN=TestName
KERNEL      ?= 6.1
ARCH        ?= amd64
RUN         ?=
VMFLAGS     ?=
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Architectures (and systems) that must build with CGO_ENABLED=0. make
# cross type-checks the whole module, tests included, for every one and
# assembles its .s files there (internal/cmd/crosscheck: seconds, where
# compiling a standard library per target took minutes on a fresh
# machine), and builds it for real on CROSSBUILD, whose standard libraries
# the gate compiles anyway (the host's and the arm64 guests'). make
# crossfull builds every target for real and vets darwin and windows.
CROSS       ?= linux/amd64 linux/arm64 linux/riscv64 linux/ppc64le linux/s390x linux/mips linux/mips64 linux/loong64 linux/386 linux/arm darwin/arm64 darwin/amd64 windows/amd64
CROSSBUILD  ?= linux/amd64 linux/arm64
CROSSVET    ?=
# Packages whose unit tests need no device, run again for 386 (32-bit
# layouts) and s390x (big-endian, under qemu-user): make unit32 bigendian.
PORTPKGS    ?= ./uapi/ ./provider/... ./internal/transport/ ./internal/kverbs/ ./internal/netlink/ ./internal/ucma/ ./cq/ ./uverbs/ ./cmd/goverbs/
# Every fuzz target (package:FuzzName): make fuzz runs each for FUZZTIME
# (go test -fuzz takes one target per run), and fails on a Fuzz func not
# listed here.
# Their seed corpora (f.Add, testdata/fuzz/) also run in make unit.
# One target for longer: make fuzz FUZZ_TARGETS=./provider/rxe:FuzzPoll FUZZTIME=10m
# The default is a count of inputs, not a duration: go1.26's fuzz coordinator
# can fail a target with a bare "context deadline exceeded" when a duration
# -fuzztime runs out on a loaded machine (go.dev/issue/75804, fixed in go1.27),
# which failed CI once. A count has no deadline to race. With a duration,
# make fuzz retries a target once when that bare error is all it printed.
FUZZTIME    ?= 100000x
FUZZ_ALL    := \
	./provider/rxe:FuzzWC ./provider/rxe:FuzzPoll ./provider/rxe:FuzzConvertWC ./provider/rxe:FuzzPostSend ./provider/rxe:FuzzPostSRQRecv ./provider/mlx5:FuzzPoll ./provider/mlx5:FuzzPostSend \
	./internal/transport:FuzzCmd \
	./internal/kverbs:FuzzExQueryDeviceResp ./internal/kverbs:FuzzGIDTable \
	./uverbs:FuzzAsyncEvents ./uverbs:FuzzParseAsyncEvent ./uverbs:FuzzDeviceAttr ./uverbs:FuzzPortAttr \
	./uverbs:FuzzGIDEntry ./uverbs:FuzzParseGID ./uverbs:FuzzParseGUID ./uverbs:FuzzParseSysfsGIDType \
	./uverbs:FuzzParseEndpoint ./uverbs:FuzzEndpointRoundTrip ./uverbs:FuzzParseGRH ./cmd/goverbs:FuzzPerfPeer ./cmd/goverbs:FuzzResLines \
	./internal/netlink:FuzzParseAttrs ./internal/netlink:FuzzParseReplies ./internal/netlink:FuzzRepliesRoundTrip \
	./internal/netlink:FuzzParseAck ./internal/netlink:FuzzRDMAReplies ./internal/netlink:FuzzParseResources \
	./internal/netlink:FuzzParseResDump ./internal/netlink:FuzzParseHWCounters \
	./internal/ucma:FuzzParseEvent ./internal/ucma:FuzzParseAddrResp ./internal/ucma:FuzzParseRoute \
	./internal/ucma:FuzzParsePaths ./internal/ucma:FuzzSockaddr ./rdmanet:FuzzParseWire ./rdmanet:FuzzParseToken
FUZZ_TARGETS ?= $(FUZZ_ALL)

.PHONY: all build test check fmt vet lint cross crossfull unit model hwtest fuzz unit32 bigendian vm vmrace vmselftest vmtest vmnet vmfull demo bench fetch pins tools clean help generate

all: build

help:
	@echo "make demo     boot a VM with soft-RoCE and show the device as goverbs and rdma-core see it"
	@echo "make check    before every commit: gofmt, vet, staticcheck, host unit tests, the mlx5 model (about 2 min warm)"
	@echo "make test     the gate: check, cross builds, fuzzing, 32-bit and big-endian, the harness self-test, the VM suite, the network faults, the race detector; a time table at the end"
	@echo "make vmfull   the whole VM suite on every kernel and arch (make test runs arm64 on a subset)"
	@echo "make crossfull build the whole module for every cross target (make test type-checks it there and builds amd64 and arm64)"
	@echo "make vmtest KERNEL=6.12 ARCH=arm64 RUN=TestName    one kernel, one arch, one test pattern"
	@echo "make vmnet    the two-host guest and its network faults (test/netfault) only"
	@echo "make build    build bin/goverbs (static)"

build:
	$(GO) build -o bin/goverbs ./cmd/goverbs

# Regenerate uapi/ from the pinned RDMA headers (internal/cmd/genuapi/pins.go:
# Debian packages it downloads with apt-get download; it needs gcc), then
# uverbs' bit names (stringer, pinned in its go:generate line; go run
# fetches that version through the module proxy, go.mod is untouched).
generate: tools
	@sh test/host.sh gcc
	$(GO) generate ./uapi/...
	$(GO) generate ./uverbs/...

# Host tools the targets below need: Go itself must be there.
tools:
	@command -v $(GO) >/dev/null || { echo "make: Go is not installed (need Go >= 1.24 on PATH)"; exit 1; }

# Each stage in order, stopping at the first that fails, then a table of
# their times (test/stages.sh); docs/TESTING.md says what runs where.
TESTSTAGES ?= check cross hwtest fuzz unit32 bigendian vmselftest vm vmnet vmrace
# make test fuzzes each target for a fifth of make fuzz's inputs: 87 s for
# all of them where the full count takes about 400 s on a 2-core machine.
TESTFUZZTIME ?= 20000x
test: tools
	@MAKE="$(MAKE)" FUZZTIME="$(TESTFUZZTIME)" sh test/stages.sh $(TESTSTAGES)

# What a developer runs before every commit: about 2 minutes warm.
check: fmt vet lint unit model

fmt: tools
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	@echo "gofmt: ok"

vet: tools
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./...

lint: tools
	$(GO) run $(STATICCHECK) ./...
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	@echo "go mod tidy: ok"

cross: tools
	@echo "go run ./internal/cmd/crosscheck $(CROSS)   (CGO_ENABLED=0: type-checks ./... and its tests, assembles the .s files)"
	@$(GO) run ./internal/cmd/crosscheck $(CROSS)
	@set -e; for p in $(CROSSBUILD); do \
		echo "CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build ./..."; \
		GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build ./...; \
	done
	@set -e; for os in $(CROSSVET); do \
		echo "GOOS=$$os go vet ./..."; \
		GOOS=$$os $(GO) vet ./...; \
	done
	@! grep -rlE --include='*.go' '^import "C"|^[[:space:]]*"C"$$' . || { echo "cgo found: goverbs has none"; exit 1; }
	@$(GO) build -o bin/goverbs ./cmd/goverbs && { command -v file >/dev/null || (apt-get install -y -qq file >/dev/null 2>&1 || true); }; \
	if command -v file >/dev/null; then file bin/goverbs | grep -q 'statically linked' || { file bin/goverbs; echo "bin/goverbs is not static"; exit 1; }; \
	echo "bin/goverbs: statically linked"; fi

# gcc: internal/cmd/genuapi's TestUpToDate regenerates uapi, as make
# generate does, from the pinned packages make pins put in the cache: go
# test itself never downloads.
# Where the host can make a network namespace, the tests run in one with
# no network at all (unshare -rn), which proves them hermetic every time.
unit: tools pins
	@sh test/host.sh gcc
	@if unshare -rn true 2>/dev/null; then \
		echo "unshare -rn go test -count=1 ./...   (no network)"; unshare -rn $(GO) test -count=1 ./...; \
	else echo "go test -count=1 ./...   (unshare -rn is not possible here: with the network)"; $(GO) test -count=1 ./...; fi

# genuapi's pinned inputs (three Debian packages) into the cache, where
# TestUpToDate reads them offline; nothing to do when they are there.
pins: tools
	@$(GO) run ./internal/cmd/genuapi -fetch >/dev/null

# The mlx5 provider without a ConnectX: the device model's own tests, then
# the conformance suite through the mlx5 provider on the model
# (internal/mlx5model), once per model variant: default (dynamic UARs,
# cqe_version 1), static (a kernel < 5.8: static UARs), refusedyn (one that
# refuses dynamic UARs with EINVAL), cqe0.
MODELVARIANTS ?= default static refusedyn cqe0
model: tools
	@sh test/host.sh gcc
	$(GO) test -count=1 ./internal/mlx5model/...
	@set -e; for v in $(MODELVARIANTS); do o=$$v; [ "$$o" = default ] && o=; \
		echo "GOVERBS_TEST_DEVICE=mlx5model GOVERBS_MLX5MODEL=$$o go test -count=1 ./test/conformance/"; \
		GOVERBS_TEST_DEVICE=mlx5model GOVERBS_MLX5MODEL=$$o $(GO) test -count=1 ./test/conformance/; \
	done
	@echo "CGO_ENABLED=1 GOVERBS_TEST_DEVICE=mlx5model go test -race ./test/conformance/ ./internal/mlx5model/ ./provider/mlx5/  (race detector: tests only)"
	@CGO_ENABLED=1 GOVERBS_TEST_DEVICE=mlx5model $(GO) test -race -count=1 ./test/conformance/ ./internal/mlx5model/ ./provider/mlx5/
	@echo "go run ./internal/cmd/hwcheck -model  (make hwtest's checklist, each step on the model)"
	@$(GO) run ./internal/cmd/hwcheck -model

# The mlx5 hardware checklist (internal/cmd/hwcheck) on every mlx5 device
# this machine has: one line a step, then a summary to paste into an
# issue. GOVERBS_TEST_GID_INDEX picks a RoCE v2 GID (default 1). Without a
# ConnectX it prints its NOT RUN line: the mlx5 provider was then proven
# against the device model only (make model runs the same checklist there).
hwtest: tools
	$(GO) run ./internal/cmd/hwcheck

# Each fuzz target for FUZZTIME. A failing input is written to the package's
# testdata/fuzz/<FuzzName>/: fix the bug and commit it as a regression seed.
fuzz: tools
	@have=$$(grep -rHo --include='*_test.go' --exclude-dir=testdata '^func Fuzz[A-Za-z0-9_]*' . | \
		sed 's|^\(.*\)/[^/]*:func |\1:|' | sort -u); \
	missing=$$(for t in $$have; do case " $(FUZZ_ALL) " in *" $$t "*) ;; *) echo "$$t";; esac; done); \
	if [ -n "$$missing" ]; then echo "make fuzz: add to FUZZ_ALL in the Makefile:"; echo "$$missing"; exit 1; fi
	@set -e; fuzz1() { $(GO) test -run '^$$' -fuzz "^$${1#*:}\$$" -fuzztime $(FUZZTIME) $${1%%:*} 2>&1; }; \
	for t in $(FUZZ_TARGETS); do \
		echo "go test -fuzz $${t#*:} -fuzztime $(FUZZTIME) $${t%%:*}"; \
		out=$$(fuzz1 $$t) && continue; \
		if echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:'; then \
			echo "  $${t#*:}: bare 'context deadline exceeded' at the -fuzztime boundary (go.dev/issue/75804), no failing input: running it once more"; \
			out=$$(fuzz1 $$t) && continue; \
		fi; \
		echo "$$out"; exit 1; \
	done; echo "fuzz: ok"

# 32-bit: kernel structs keep their u64 fields and alignment (uapi's layout
# test against C), and the parsers work with 4-byte pointers. Natively where
# the host runs 386 binaries, else under QEMU's user-mode emulator
# (test/host.sh exec, which says which; GOVERBS_EXEC=qemu forces QEMU).
unit32: tools
	@x=$$(sh test/host.sh exec 386) || exit 1; \
	echo "GOARCH=386 go test $${x:+-exec $$x }-count=1 $(PORTPKGS)"; \
	GOARCH=386 $(GO) test $${x:+-exec $$x} -count=1 $(PORTPKGS)

# Big-endian: the ring parsers', layouts' and command builder's tests for
# s390x, run by QEMU's user-mode emulator (test/host.sh exec).
bigendian: tools
	@x=$$(sh test/host.sh exec s390x) || exit 1; \
	echo "GOARCH=s390x go test $${x:+-exec $$x }-count=1 $(PORTPKGS)"; \
	GOARCH=s390x $(GO) test $${x:+-exec $$x} -count=1 $(PORTPKGS)

# make test's VM suite: every package on the amd64 guests; on the arm64
# ones (ARCHSET) the packages whose code or ABI differs by architecture
# (test/vm's archPackages). make vmfull runs every package everywhere.
ARCHSET     ?= arm64
vm: tools
	$(GO) run ./test/vm -vms $(VMS) -archset '$(ARCHSET)' $(VMFLAGS) test

# The whole VM suite on every kernel and arch, and the whole suite under
# the race detector: what make test samples.
vmfull: tools
	$(GO) run ./test/vm -vms $(VMS) $(VMFLAGS) test
	$(MAKE) vmrace VMRACEPKG=./...

# The whole module built for real for every CROSS target, and vetted for
# darwin and windows (make cross type-checks it everywhere).
crossfull: tools
	$(MAKE) cross CROSSBUILD="$(CROSS)" CROSSVET="darwin windows"

# Two hosts and a bad network (test/netfault): the two-host guest (rxe0 on
# veth0, rxe1 on veth1, netem between them) on each amd64 kernel. Full
# sizes: VMFLAGS=-env=GOVERBS_NETFAULT_MSGS=200000 (docs/RELIABILITY.md).
NETVMS      ?= 6.1/amd64,6.12/amd64
vmnet: tools
	$(GO) run ./test/vm -vms $(NETVMS) -twohost -pkg ./test/netfault/ $(VMFLAGS) test

# The VM suite again with the race detector, on 6.1/amd64: the test binaries
# only are built with CGO_ENABLED=1 -race, and the host's loader and libc go
# into the guest; the library and the tool stay cgo-free. VMRACEPKG is the
# packages whose code runs goroutines, or whose tests race goroutines
# against it; left out are the parsers and layouts (uapi, kverbs, ucma,
# netlink, errs), the host-only and model packages, and test/interop and
# test/bench, whose goverbs side is the tool in a process of its own (never
# a race build). make vmfull races every package.
VMRACEPKG   ?= ./cq/,./uverbs/,./provider/rxe/,./internal/fdturn/,./internal/release/,./internal/transport/,./internal/provider/,./rdmacm/,./rdmanet/,./cmd/goverbs/,./examples/...,./test/conformance/,./test/reliability/
vmrace: tools
	$(GO) run ./test/vm -vms 6.1/amd64 -race -pkg '$(VMRACEPKG)' $(if $(RUN),-run '$(RUN)') $(VMFLAGS) test

# Broken guests (no /init, an /init that dies, a hanging step) must each fail clearly.
vmselftest: tools
	$(GO) run ./test/vm -vms 6.12/amd64 selftest

vmtest: tools
	$(GO) run ./test/vm -kernel $(KERNEL) -arch $(ARCH) $(if $(RUN),-run '$(RUN)') $(VMFLAGS) test

# goverbs against rdma-core, one VM per kernel: the Go benchmarks on real rxe
# rings (test/bench) beside the same loops in C (test/bench/testdata/cbench.c,
# built with the host's gcc), perftest beside goverbs perf, ibv_rc_pingpong
# beside goverbs pingpong, cmtime beside goverbs cmtime; then the mlx5 provider's benchmarks on the host.
# Writes docs/performance-results.md and docs/performance.svg (not with RUN).
# Then it counts the Go benchmarks and their C twins in instructions, in one
# more 6.1 VM under QEMU's -icount (a measure that repeats, where TCG's
# timings do not), with the tool pairs that block (COUNTPAIRS: the cmtime
# pairs and the rstream pairs, not the spinning ones), and writes
# docs/performance-counts.md (not with RUN; COUNT=0 leaves that run out).
# docs/PERFORMANCE.md says how to read them.
# VMFLAGS=-benchprofile=DIR copies CPU profiles out of the guest.
COUNT ?= 1
COUNTPAIRS ?= ^(cmtime|cmtime_steps|stream_lat|stream_bw|stream_lat_tcp|stream_bw_tcp)$$
bench: tools
	$(GO) run ./test/vm -vms 6.1/amd64,6.12/amd64 $(if $(RUN),-run '$(RUN)') $(VMFLAGS) bench
ifneq ($(COUNT),0)
	$(GO) run ./test/vm -vms 6.1/amd64 -qemuicount=0 -benchpairs '$(COUNTPAIRS)' -benchrounds=1 -benchmicro=1 $(if $(RUN),-run '$(RUN)') bench
endif

demo: tools
	$(GO) run ./test/vm $(VMFLAGS) demo

fetch: tools pins
	$(GO) run ./test/vm -vms $(VMS) fetch

clean:
	rm -rf bin
