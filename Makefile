# clustershard — build, test and demo. Everything is built from Go modules:
# the control plane (kube-apiserver, etcd) by the tools module in hack/tools.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

BIN := $(CURDIR)/bin
# envtest finds kube-apiserver and etcd here.
export KUBEBUILDER_ASSETS := $(BIN)

CONTROLLER_GEN := go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0
GOLANGCI_LINT  := go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
KUBE_VERSION   := v1.37.2
# Version stamped into kube-apiserver so /version answers like a real release.
KUBE_LDFLAGS := -s -w \
	-X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 \
	-X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/component-base/version.gitTreeState=clean

# Packages whose tests also run under the race detector in `make test`.
RACE_PKGS := ./registry/... ./shard/... ./replica/...
TEST_TIMEOUT ?= 18m

.PHONY: help
help: ## Show the targets.
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-13s %s\n",$$1,$$2}'

##@ Control plane

.PHONY: controlplane
controlplane: $(BIN)/kube-apiserver $(BIN)/etcd ## Build kube-apiserver and etcd into bin/ (cold ~11 min on 2 cores, then cached).

# Rebuilt only when the tools module's versions change (or the binaries are missing).
$(BIN)/kube-apiserver $(BIN)/etcd &: hack/tools/go.mod hack/tools/go.sum
	@mkdir -p $(BIN)
	@echo ">> building etcd from go.etcd.io/etcd/server/v3 (hack/tools)"; start=$$(date +%s); \
	  cd hack/tools && go build -ldflags='-s -w' -o $(BIN)/etcd go.etcd.io/etcd/server/v3; \
	  echo "   etcd built in $$(( $$(date +%s) - start ))s"
	@echo ">> building kube-apiserver $(KUBE_VERSION) from k8s.io/kubernetes (hack/tools; cold ~11 min on 2 cores)"; start=$$(date +%s); \
	  cd hack/tools && go build -ldflags='$(KUBE_LDFLAGS)' -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver; \
	  echo "   kube-apiserver built in $$(( $$(date +%s) - start ))s"
	@touch $(BIN)/kube-apiserver $(BIN)/etcd

##@ Prometheus

# promtool and the Prometheus server, built from the Prometheus Go module by
# hack/prometheus at the version the main module uses (`make verify` checks).
PROM_VERSION = $$(cd hack/prometheus && go list -m -f '{{.Version}}' github.com/prometheus/prometheus)

.PHONY: promtool
promtool: $(BIN)/promtool ## Build promtool into bin/ for the monitoring tests of `make test` (cold ~3 min on 2 cores, then cached).

.PHONY: prometheus
prometheus: $(BIN)/prometheus ## Build the Prometheus server into bin/ for `make e2e` (cold ~3 min on 2 cores, then cached).

# Each is rebuilt only when hack/prometheus's versions change (or it is missing).
$(BIN)/promtool $(BIN)/prometheus: $(BIN)/%: hack/prometheus/go.mod hack/prometheus/go.sum
	@mkdir -p $(BIN)
	@version=$(PROM_VERSION); echo ">> building $* from github.com/prometheus/prometheus $$version (hack/prometheus)"; start=$$(date +%s); \
	  cd hack/prometheus && go build -ldflags="-s -w -X github.com/prometheus/common/version.Version=$$version" -o $@ github.com/prometheus/prometheus/cmd/$*; \
	  echo "   $* built in $$(( $$(date +%s) - start ))s"
	@touch $@

##@ Code generation

.PHONY: generate
generate: ## Generate deepcopy code with controller-gen.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

.PHONY: manifests
manifests: ## Generate CRDs and RBAC with controller-gen.
	$(CONTROLLER_GEN) crd paths=./api/v1alpha1/... output:crd:dir=deploy/crds
	$(CONTROLLER_GEN) crd paths=./api/example/... output:crd:dir=deploy/examples/crds
	$(CONTROLLER_GEN) rbac:roleName=clustershard paths=./controllers/... paths=./shard/... output:rbac:dir=deploy/rbac
	cp deploy/crds/clustershard.io_remoteclusters.yaml deploy/helm/clustershard/crds/
	cp deploy/rbac/role.yaml deploy/helm/clustershard/files/role.yaml
	go run ./hack/gen-prometheusrule
	go run ./hack/gen-dashboard

.PHONY: verify
verify: ## Fail when generated files are stale or go.mod is untidy.
	@$(MAKE) --no-print-directory generate manifests
	@go mod tidy
	@cd hack/prometheus && go mod tidy
	@main=$$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus); tools=$(PROM_VERSION); \
	  [ "$$main" = "$$tools" ] || { echo "hack/prometheus builds Prometheus $$tools but go.mod uses $$main: run 'cd hack/prometheus && go get github.com/prometheus/prometheus@$$main && go mod tidy'"; exit 1; }
	@if [ -n "$$(git status --porcelain -- api deploy go.mod go.sum hack/prometheus)" ]; then \
	  echo "generated files or go.mod are stale; run 'make generate manifests' and 'go mod tidy' and commit:"; \
	  git status --porcelain -- api deploy go.mod go.sum hack/prometheus; git --no-pager diff --stat -- api deploy go.mod go.sum hack/prometheus; exit 1; fi
	@echo "generated files are up to date"

##@ Build and test

.PHONY: build
build: ## Build every package.
	go build ./...

.PHONY: test
test: controlplane promtool ## Run the whole test suite against a real local control plane.
	go test -count=1 -timeout $(TEST_TIMEOUT) ./...
	@if go list $(RACE_PKGS) >/dev/null 2>&1; then \
	  echo ">> race detector: $(RACE_PKGS)"; go test -count=1 -race -timeout $(TEST_TIMEOUT) $(RACE_PKGS); fi
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SMOKE)

# The fuzz targets, as package:Target; their seed corpora are in the code
# (f.Add) and in each package's testdata/fuzz.
FUZZ_TARGETS := ./internal/remote:FuzzParse ./internal/remote:FuzzParseKeepsSecrets \
  ./internal/remotecopy:FuzzParseKind ./internal/remotecopy:FuzzMirrorStatus \
  ./shard:FuzzClusterLeaseName ./internal/helmrelease:FuzzParseValues
FUZZ_SMOKE ?= 4000x
FUZZTIME ?= 10m

.PHONY: fuzz
fuzz: ## Fuzz each target for FUZZTIME (make test runs each for FUZZ_SMOKE).
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; name=$${t##*:}; \
	  echo ">> fuzz $$name ($$pkg) for $(FUZZTIME)"; \
	  go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; done

.PHONY: lint
lint: ## Run gofmt, go vet and golangci-lint.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	$(GOLANGCI_LINT) run ./...

.PHONY: demo
DEMO_ARGS ?=
demo: controlplane ## Start a local control plane with 3 replicas and show ownership moving (Ctrl-C to stop).
	@echo ">> building bin/clustershard and bin/clustershard-dev"; go build -o $(BIN)/clustershard ./cmd/clustershard && go build -o $(BIN)/clustershard-dev ./cmd/clustershard-dev
	$(BIN)/clustershard-dev demo $(DEMO_ARGS)

.PHONY: e2e
# The drills' fleets. At production timings the fleet is beyond the old
# default (R=3, M=30): one replica more and twice the clusters. At the short
# timings (renew deadline 2 s) that larger fleet overloads a 2-core machine at
# its cold start (membership renewals lapse past their grace: on 2026-12-08
# all 60 clusters changed hands during the cold start, one of them after its
# manager had started), so the short drill keeps R=3, M=30. Both run
# churn, and every Helm install is held 2 s by its post-install hook, so
# installs, copies and status writes are on their way when replicas start,
# join and leave.
E2E_SLOW_HELM = --churn --remotes 3 --objects-per-cluster 10 --helm-hook-delay 2s
E2E_SHORT = --replicas 3 --clusters-per-remote 10 $(E2E_SLOW_HELM)
E2E_PRODUCTION = --replicas 4 --clusters-per-remote 20 $(E2E_SLOW_HELM) --lease-duration 15s --renew-deadline 10s --retry-period 2s
e2e: controlplane prometheus ## Every drill scenario at R=3 M=30 (short timings) and R=4 M=60 (production timings), with churn and slow Helm installs; the scale drill R=4 -> 6 -> 2 at M=45; Prometheus through a kill drill.
	go build -o $(BIN)/clustershard ./cmd/clustershard
	go build -o $(BIN)/clustershard-dev ./cmd/clustershard-dev
	@status=0; \
	echo ">> drill at short timings (lease 4s, renew deadline 2s, retry 500ms), R=3 M=30"; \
	$(BIN)/clustershard-dev drill $(E2E_SHORT) --report $(BIN)/drill-report.json || status=$$?; \
	echo ">> drill at production timings (lease 15s, renew deadline 10s, retry 2s), R=4 M=60"; \
	$(BIN)/clustershard-dev drill $(E2E_PRODUCTION) --report $(BIN)/drill-report-production.json || status=$$?; \
	echo ">> larger scale drill: R=4 -> 6 -> 2 over M=45 with churn"; \
	$(BIN)/clustershard-dev drill --scenarios scale --churn --replicas 4 --remotes 3 --clusters-per-remote 15 --objects-per-cluster 10 --helm-hook-delay 2s \
	  --report $(BIN)/drill-report-scale.json || status=$$?; \
	go test -tags e2e -count=1 -timeout 30m -v -run 'TestPrometheusDuringKillDrill' ./cmd/clustershard/ || status=$$?; \
	exit $$status

.PHONY: bench
bench: controlplane ## Every benchmark scenario with its baseline (about 30 min): bench/results/<date>.json, bench/plots, bench/RESULTS.md.
	go build -o $(BIN)/clustershard ./cmd/clustershard
	go run ./bench/cmd/bench --binary $(BIN)/clustershard --out bench
