# Driftline developer targets. `make test` is what CI runs (.ci/run).
#
#   make build   build every binary into bin/
#   make up      start the local stack in the background (state in .driftline/)
#   make down    stop it
#   make run     start the stack, feed a synthetic fleet, print a summary; Ctrl-C stops
#   make cluster-up    start a local ClickHouse cluster (ZooKeeper, 2 shards x 2 replicas,
#                ports 29000-29204), migrate it and print the flags that use it
#   make cluster-down  stop it (its data stays in .driftline/cluster)
#   make test    all tests (starts ClickHouse and brokers; installs ClickHouse when absent and root)
#   make soak    long fault schedules for SOAK (20m): every component killed and restarted under load
#   make check   go vet, staticcheck (installed into GOBIN when absent), then every
#                test under the race detector
#   make bench   the end-to-end harness (bench/harness): real processes, the baseline,
#                figures in bench/RESULTS.md and bench/scaling.png (1M and 10M events;
#                latency at 100,000 events/s)
#   make bench-fleet  10M identities over 8 joiners (one scan round, no usage: about
#                22.5M events); the joiners need about 20 GiB together (19.7 GiB when
#                the last run reached the harness's floor: it stops a phase that would
#                leave less than 1.5 GiB, -mem.floor)
#   make bench-micro  Go benchmarks of bench/ and pipeline/, with allocations
#   make fuzz    run every fuzz target of the tree (each decoder of outside input)
#                for FUZZTIME (1m) each
#   make clean   remove bin/ (make distclean also removes the stack's data)

GO        ?= go
BIN       := bin
TEST_TIMEOUT ?= 25m
# Test binaries of several packages start their own ClickHouse servers and
# brokers; two at a time keeps a small machine responsive.
TEST_P    ?= 2
BENCH     ?= .
BENCHTIME ?= 1s
# Data set sizes of `make bench` (generated events; k/m suffixes) and extra
# harness flags (go run ./bench/harness -h). The defaults are the run of
# the committed bench/RESULTS.md: every joiner count at 1M and at 10M.
BENCH_SIZES ?= 1m,10m
BENCH_FLAGS ?= -scaling.upTo=10m

FUZZTIME  ?= 1m
# staticcheck of make check: the one on PATH, else the one in GOBIN,
# installed at STATICCHECK_VERSION when missing.
STATICCHECK_VERSION ?= latest
GOBIN_DIR   := $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)
STATICCHECK ?= $(or $(shell command -v staticcheck 2>/dev/null),$(GOBIN_DIR)/staticcheck)
# make soak runs fault schedules back to back until SOAK has passed (the
# run under way finishes); DRIFTLINE_FAULT_SEED=n replays one.
SOAK      ?= 20m
SOAK_TIMEOUT ?= 90m


.PHONY: cluster-up cluster-down
.PHONY: build up down status run test soak check bench bench-fleet bench-micro fuzz clean distclean

build:
	$(GO) build -o $(BIN)/ ./cmd/...

up: build
	$(BIN)/stack up -detach

down:
	@if [ -x $(BIN)/stack ]; then $(BIN)/stack down; else $(GO) run ./cmd/stack down; fi

status:
	@$(BIN)/stack status

run: build
	$(BIN)/stack run

cluster-up: build
	$(BIN)/stack cluster-up

cluster-down:
	@if [ -x $(BIN)/stack ]; then $(BIN)/stack cluster-down; else $(GO) run ./cmd/stack cluster-down; fi

test: build
	$(GO) test -timeout $(TEST_TIMEOUT) -p $(TEST_P) ./...

soak: build
	DRIFTLINE_SOAK=$(SOAK) $(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestFaultSoak$$' -v ./e2e/

check:
	$(GO) vet ./...
	@test -x "$(STATICCHECK)" || { echo "installing staticcheck@$(STATICCHECK_VERSION) into $(GOBIN_DIR)"; \
		GOBIN="$(GOBIN_DIR)" $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); }
	$(STATICCHECK) ./...
	$(GO) test -race -timeout $(TEST_TIMEOUT) -p $(TEST_P) ./...

bench: build
	$(GO) build -o $(BIN)/naive ./bench/naive
	$(GO) run ./bench/harness -bin $(BIN) -sizes $(BENCH_SIZES) -results bench/RESULTS.md -plot bench/scaling.png $(BENCH_FLAGS)

bench-fleet: build
	$(GO) run ./bench/harness -bin $(BIN) -sizes 10m -sizes.identities -fleet.rounds 1 -fleet.usage 0 -ledger=false \
		-joiners 8 -naive=false -rater=false -billing=false -latency.rate 0 -timeout 40m

bench-micro:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $(BENCHTIME) ./bench/... ./pipeline/...

# Every fuzz target of the module's packages (a func Fuzz... in a _test.go
# file), found anew on each run so that a new one cannot be left out. Their
# seed corpora (and testdata/fuzz) run in every `make test`; this target
# explores further, one target at a time.
fuzz:
	@$(GO) list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$dir"/*_test.go 2>/dev/null); do \
			echo "$(GO) test -run '^$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) $$pkg"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) "$$pkg" </dev/null || exit 1; \
		done; \
	done

clean:
	rm -rf $(BIN) bench/out

distclean: down clean
	rm -rf .driftline
