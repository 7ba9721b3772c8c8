# eppsim build and test entry points. Every target uses only the Go toolchain
# and the Go module proxy; staticcheck is pinned as a tool in go.mod.

GO        ?= go
PKGS      ?= ./...
BENCHTIME ?= 1x
FUZZTIME  ?= 10s

.PHONY: all build test test-long vet staticcheck lint demo bench fuzz clean regress regress-update testdata-refresh

all: build test

build:
	$(GO) build -o bin/eppsim ./cmd/eppsim

## test: vet + staticcheck + the whole suite under the race detector, with
## -short: tests that re-check on a whole trace or a large corpus what a
## shorter input already checks run at the shorter size (a few minutes on
## a 2-core machine; -timeout 30m instead of go test's 10 minutes per
## package, which cmd/eppsim and scenario outran under the race detector on
## a machine busy with a calibration).
test: vet staticcheck
	$(GO) test -race -short -count=1 -timeout 30m $(PKGS)

## test-long: every test at full size (whole shared traces, large corpora,
## the latency validation), without the race detector, which make test
## already applies to the same code.
test-long:
	$(GO) test -count=1 -timeout 60m $(PKGS)

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) tool staticcheck $(PKGS)

lint: vet staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## demo: the main job on the embedded default workload.
demo:
	$(GO) run ./cmd/eppsim run

## bench: the simulator's own speed (see README "Performance"). Micro
## benchmarks run for go test's default time; the whole-trace benchmarks
## (BenchmarkMooncake*: one iteration replays the shared Mooncake trace; they
## skip when ../shared is absent) run $(BENCHTIME) on one core: among them
## BenchmarkMooncakeShared (issue #17 target 1: CPU seconds of 4 configs on
## one read) and BenchmarkMooncakeConfigs (target 2: oracle and the shipped
## precise config against the default, CPU-seconds ratios), and
## BenchmarkMooncakeCapacity (capacity package, issue #20: a 4-config
## max-rate search's CPU seconds in single runs, and the early stop's
## saving). Then target 3:
## `eppsim run` on Mooncake/16 built at 17c5c5f and from this tree,
## alternated, medians of $(ROUNDS) rounds, with and without --out. Last,
## target 4, BenchmarkScale (about 5 minutes; synthesized traces, so it
## needs no ../shared): requests per wall and CPU second and peak RSS
## against fleet size and trace length, its table and plot in $(SCALE_OUT).
ROUNDS    ?= 5
MOONCAKE  ?= ../shared/traces/mooncake_conversation_trace.jsonl
SCALE_OUT ?= out/bench
bench:
	$(GO) test -run '^$$' -bench . -skip '^Benchmark(Mooncake|Scale)' -benchmem $(PKGS)
	$(GO) test -run '^$$' -bench '^BenchmarkMooncake' -benchtime $(BENCHTIME) -cpu 1 -benchmem $(PKGS)
	@if [ -f $(MOONCAKE) ]; then .ci/compare-speed -n $(ROUNDS) -o 17c5c5f . -- --trace $(MOONCAKE) --replicas 16; \
	  else echo "compare-speed skipped: $(MOONCAKE) absent"; fi
	EPPSIM_SCALE_OUT=$(abspath $(SCALE_OUT)) $(GO) test -run '^$$' -bench '^BenchmarkScale$$' -benchtime 1x -timeout 90m ./scenario/
	@cat $(SCALE_OUT)/scale.csv

## fuzz: a short run of every fuzz target (one package at a time, as go test requires).
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) .ci/fuzz

## regress: eppsim's own regression gate (docs/ci.md). Runs the pinned
## scenarios of testdata/regress/scenarios.yaml and compares every field
## with the committed baselines there (eppsim diff --tolerance); any change
## fails. Reports and plots go to out/regress. Scenarios that need
## ../shared are skipped without it.
regress: build
	$(GO) build -o bin/eppsim-regress ./cmd/eppsim-regress
	bin/eppsim-regress -eppsim bin/eppsim -dir testdata/regress -out out/regress

## regress-update: rewrite the baselines from the current code. Commit them
## in the same commit as the change, with out/regress/regress.md (the diff)
## in the commit message.
regress-update: build
	$(GO) build -o bin/eppsim-regress ./cmd/eppsim-regress
	bin/eppsim-regress -eppsim bin/eppsim -dir testdata/regress -out out/regress -update

## testdata-refresh: copy the golden vectors, the shipped EPP configs and
## the published benchmarks' EPP configs from the shared folder into
## testdata/shared (testdata/shared/README.md);
## a fresh clone's tests read these copies, and TestSharedCopiesCurrent
## fails in CI when they are stale.
SHARED ?= ../shared
testdata-refresh:
	@test -d $(SHARED) || { echo "$(SHARED) is absent: nothing to refresh from"; exit 2; }
	rm -f testdata/shared/epp-configs/*.yaml
	cp $(SHARED)/epp-configs/*.yaml testdata/shared/epp-configs/
	cp $(SHARED)/golden/epp-golden.json testdata/shared/golden/
	rm -rf testdata/shared/benchmarks
	for f in $(SHARED)/benchmarks/*/*.yaml; do \
		case $$f in */inference-perf.yaml) continue;; esac; \
		d=testdata/shared/benchmarks/$$(basename $$(dirname $$f)); mkdir -p $$d && cp $$f $$d/ || exit 1; \
	done
	chmod 644 testdata/shared/epp-configs/*.yaml testdata/shared/golden/epp-golden.json testdata/shared/benchmarks/*/*.yaml

clean:
	rm -rf bin
