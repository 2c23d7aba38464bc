# switchboard — the Connections API as a Kubernetes operator.
# `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

LOCALBIN ?= $(CURDIR)/bin
# hack/kube-version pins the Kubernetes release of the control plane (envtest, switchboard dev).
KUBE_VERSION ?= $(shell cat hack/kube-version)
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(KUBE_VERSION)
export KUBEBUILDER_ASSETS ?= $(ENVTEST_ASSETS)
# Where hack/envtest-fetch downloads the control plane's binaries from (Kubernetes' and etcd's
# releases, or mirrors of them), and the SHA-512 it trusts for each (docs/developing.md, "The
# control plane's binaries").
export ENVTEST_KUBERNETES_URL ?= https://dl.k8s.io
export ENVTEST_ETCD_URL ?= https://github.com/etcd-io/etcd/releases/download
export ENVTEST_PINS ?= $(CURDIR)/hack/envtest.sha512

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0
# github.com/prometheus/prometheus, whose promtool checks and unit-tests the chart's alerting rules;
# it must be the version hack/tools/promtool/go.mod requires.
PROMETHEUS_VERSION ?= v0.316.0
CADDY_VERSION ?= v2.11.9
# sigs.k8s.io/krew, whose validate-krew-manifest checks the release's krew manifest; it must be
# the version hack/tools/krew/go.mod requires.
KREW_VERSION ?= v0.4.3
# github.com/sigstore/cosign/v2, which signs the release (`make release`) and verifies it in
# hack/release's tests; it must be the version hack/tools/cosign/go.mod requires.
COSIGN_VERSION ?= v2.6.5

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)
# The OpenID Provider the panel's sign-in tests log in on (hack/tools/oidc-op, zitadel/oidc's op
# package); named after the zitadel/oidc version its go.mod requires, which the tests read too.
OIDC_OP_VERSION := $(shell awk '$$1 == "github.com/zitadel/oidc/v3" { print $$2 } $$2 == "github.com/zitadel/oidc/v3" { print $$3 }' hack/tools/oidc-op/go.mod)
OIDC_OP ?= $(LOCALBIN)/oidc-op-$(OIDC_OP_VERSION)
PROMTOOL ?= $(LOCALBIN)/promtool-$(PROMETHEUS_VERSION)
PROMQL_METRICS ?= $(LOCALBIN)/promql-metrics-$(PROMETHEUS_VERSION)
# test/monitoring runs them.
export PROMTOOL PROMQL_METRICS
# test/gateways puts Caddy in front of the forward-auth listener (hack/tools/caddy pins it).
CADDY ?= $(LOCALBIN)/caddy-$(CADDY_VERSION)
export CADDY
# hack/release's test checks the krew manifest with it, as `make release` does.
VALIDATE_KREW_MANIFEST ?= $(LOCALBIN)/validate-krew-manifest-$(KREW_VERSION)
export VALIDATE_KREW_MANIFEST
# `make release` signs with it; hack/release's tests sign with throwaway keys and verify.
COSIGN ?= $(LOCALBIN)/cosign-$(COSIGN_VERSION)
export COSIGN
# The cluster suite installs the plugin by name from a local krew index with it.
KREW ?= $(LOCALBIN)/krew-$(KREW_VERSION)
export KREW

# A test binary may take 30 minutes, not go test's 10: test/dockerfile compiles the whole product
# with -trimpath, from a cold cache on a fresh machine, beside the other packages on 2 cores.
GO_TEST_FLAGS ?= -count=1 -timeout 30m
# The version (`git describe`: the tag, or how far past it) and commit every binary and the image
# say they are (`switchboard version`, `kubectl switchboard version`, the image's OCI labels).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/switchboard-dev/switchboard/internal/version.Version=$(VERSION) -X github.com/switchboard-dev/switchboard/internal/version.Commit=$(REVISION)

# The image `make image` builds without Docker (the Dockerfile's, see internal/local/image), and the
# pause image the test cluster's containerd runs as every pod's sandbox.
IMAGE_DIR ?= $(LOCALBIN)/image
IMAGE_REPO ?= localhost/switchboard
GOARCH ?= $(shell go env GOARCH)
PAUSE_IMAGE ?= localhost/pause:1.0
CONSUMER_IMAGE ?= localhost/consumer:1.0
# `make release`'s output, and the registry it pushes the image, its SBOM and the chart to (none
# when empty; plain HTTP on a loopback address).
RELEASE_DIR ?= $(LOCALBIN)/release
RELEASE_REGISTRY ?=
# `make release` signs with cosign and the private key COSIGN_KEY (a file, or env://VAR; its
# password COSIGN_PASSWORD), which must be COSIGN_PUB's private half; SIGN=false: an unsigned dry
# run (docs/developing.md, "Cutting a release").
SIGN ?= true
COSIGN_PUB ?= $(CURDIR)/cosign.pub
# `make cluster`'s state: the kubeconfig, logs, and what `make cluster-down` removes.
CLUSTER_DIR ?= $(LOCALBIN)/cluster

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the markers in api/ and internal/controller/.
	$(CONTROLLER_GEN) rbac:roleName=switchboard-operator crd:allowDangerousTypes=false paths="./api/..." paths="./internal/controller/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@rm -rf internal/local/devenv/crds/bases && mkdir -p internal/local/devenv/crds/bases && cp config/crd/bases/*.yaml internal/local/devenv/crds/bases/
	@rm -rf charts/switchboard/files/crds && mkdir -p charts/switchboard/files/crds && cp config/crd/bases/*.yaml charts/switchboard/files/crds/

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: fmt
fmt: ## go fmt the code.
	go fmt ./...

.PHONY: vet
vet: ## go vet the code.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: caddy
caddy: $(CADDY) ## Build Caddy from source into bin/caddy-<version> for test/gateways (only when missing).

.PHONY: envtest
envtest: ## Download (pinned SHA-512) or else build etcd, kube-apiserver and kubectl into bin/k8s/ (only when missing).
	KUBE_VERSION=$(KUBE_VERSION) ENVTEST_ASSETS=$(ENVTEST_ASSETS) hack/envtest.sh

.PHONY: envtest-tests
envtest-tests: ## Also kube-controller-manager, which the tenant-role tests run (downloaded or built, only when missing).
	KUBE_VERSION=$(KUBE_VERSION) ENVTEST_ASSETS=$(ENVTEST_ASSETS) hack/envtest.sh --tests

.PHONY: cluster-bins
cluster-bins: ## Also kube-scheduler, kubelet and kube-proxy (downloaded or built, only when missing).
	KUBE_VERSION=$(KUBE_VERSION) ENVTEST_ASSETS=$(ENVTEST_ASSETS) hack/envtest.sh --cluster

.PHONY: test
test: manifests generate envtest-tests $(HELM) $(CADDY) $(PROMTOOL) $(PROMQL_METRICS) $(OIDC_OP) $(VALIDATE_KREW_MANIFEST) $(COSIGN) ## Run every test against a real kube-apiserver + etcd (unit, envtest, chart, alerting rules, fuzz seeds, release, e2e, cluster).
	go test $(GO_TEST_FLAGS) -skip '^TestRelease$$' ./...
	$(MAKE) test-release
	$(MAKE) test-e2e
	$(MAKE) test-cluster

.PHONY: test-release
# Alone, not beside the other packages: it cross-compiles nine binaries twice (darwin and windows
# from a cold build cache take over ten minutes on 2 cores), which go test's 30 minutes per test
# binary would not always cover on a busy machine.
test-release: $(HELM) $(VALIDATE_KREW_MANIFEST) $(COSIGN) ## Run hack/release's TestRelease: cut a signed release twice into a registry on loopback and inspect it.
	go test -count=1 -timeout 60m -run '^TestRelease$$' ./hack/release/

.PHONY: test-unit
test-unit: ## Run every test that needs no control plane, in well under a minute (build tag unit leaves the others out).
	go test $(GO_TEST_FLAGS) -tags unit ./...

.PHONY: previous-release
previous-release: ## Build the release the cluster suite upgrades from (hack/previous-release pins it) into bin/previous/<commit>/, once.
	hack/previous-release.sh

.PHONY: test-cluster
test-cluster: build pause-image consumer-image cluster-bins previous-release $(HELM) $(KREW) $(VALIDATE_KREW_MANIFEST) $(COSIGN) ## Run test/cluster: the chart on a real one-node cluster (needs root; see internal/local/cluster).
	HELM=$(HELM) hack/test-cluster.sh

.PHONY: test-e2e
test-e2e: build envtest ## Run the end-to-end suite on the real binaries (switchboard dev, kubectl, the plugin, HTTP).
	hack/test-e2e.sh

.PHONY: bench
bench: build envtest $(CADDY) ## Measure and write docs/benchmarks.md (needs wrk; about 45 minutes on 2 cores, most of it the 100k-object scale part).
	go run ./hack/bench -out docs/benchmarks.md

##@ Build

.PHONY: build
build: ## Build bin/switchboard and bin/kubectl-switchboard.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/switchboard ./cmd/switchboard
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/kubectl-switchboard ./cmd/kubectl-switchboard

.PHONY: dev
dev: build envtest ## Run the whole system on an embedded local control plane.
	$(LOCALBIN)/switchboard dev --assets $(ENVTEST_ASSETS)

.PHONY: cluster
cluster: image pause-image cluster-bins $(HELM) ## Start a one-node Kubernetes cluster in a network namespace, with the image loaded (needs root).
	go run ./hack/cluster up -dir $(CLUSTER_DIR) -assets $(ENVTEST_ASSETS) -helm $(HELM) -pause $(IMAGE_DIR)/pause.tar -image $(IMAGE_DIR)/switchboard.tar

.PHONY: cluster-down
cluster-down: ## Stop `make cluster`'s cluster and remove everything it made.
	go run ./hack/cluster down -dir $(CLUSTER_DIR)

.PHONY: image
image: ## Build the image the Dockerfile describes, without Docker, into bin/image/switchboard.tar (OCI layout).
	@mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -tags nodev -ldflags "$(LDFLAGS)" -o $(IMAGE_DIR)/switchboard ./cmd/switchboard
	go run ./hack/image -binary $(IMAGE_DIR)/switchboard -name $(IMAGE_REPO):$(VERSION) -version $(VERSION) -revision $(REVISION) -out $(IMAGE_DIR)/switchboard.tar

.PHONY: release
release: $(HELM) $(VALIDATE_KREW_MANIFEST) $(COSIGN) ## Cut release VERSION=vX.Y.Z into RELEASE_DIR, signed with COSIGN_KEY: archives, checksums, image index, SBOM, chart, notes, krew manifest (pushed to RELEASE_REGISTRY when set; docs/developing.md).
	go run ./hack/release -version "$(VERSION)" -dir "$(RELEASE_DIR)" -registry "$(RELEASE_REGISTRY)" -helm "$(HELM)" -validate-krew-manifest "$(VALIDATE_KREW_MANIFEST)" \
		-sign="$(SIGN)" -cosign "$(COSIGN)" -cosign-pub "$(COSIGN_PUB)"

.PHONY: consumer-image
consumer-image: ## Build the test cluster's client of a delivered key (hack/consumer) into bin/image/consumer.tar.
	@mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -ldflags "-s -w" -o $(IMAGE_DIR)/consumer ./hack/consumer
	go run ./hack/image -consumer -binary $(IMAGE_DIR)/consumer -name $(CONSUMER_IMAGE) -out $(IMAGE_DIR)/consumer.tar

.PHONY: pause-image
pause-image: ## Build the test cluster's pod sandbox image into bin/image/pause.tar.
	@mkdir -p $(IMAGE_DIR)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) go build -trimpath -ldflags "-s -w" -o $(IMAGE_DIR)/pause ./hack/pause
	go run ./hack/image -pause -binary $(IMAGE_DIR)/pause -name $(PAUSE_IMAGE) -out $(IMAGE_DIR)/pause.tar

.PHONY: promtool
promtool: $(PROMTOOL) $(PROMQL_METRICS) ## Build promtool (and the PromQL metric-name lister) into bin/ (only when missing).

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint the Helm chart strictly (test/chart also dry-runs every rendering).
	$(HELM) lint --strict charts/switchboard

##@ Tools

$(CONTROLLER_GEN):
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT):
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@

.PHONY: oidc-op
oidc-op: $(OIDC_OP) ## Build the tests' OpenID Provider (only when missing).

$(OIDC_OP): hack/tools/oidc-op/main.go hack/tools/oidc-op/go.mod hack/tools/oidc-op/go.sum
	cd hack/tools/oidc-op && GOFLAGS=-mod=readonly go build -trimpath -o $@ .

$(HELM):
	GOBIN=$(LOCALBIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/helm $@

# promtool and promql-metrics (the PromQL parser test/monitoring checks the rules' and the
# dashboard's metric names with) come from the tools module hack/tools/promtool and its committed
# go.sum, built once: promtool takes minutes. remove_all_sd leaves out Prometheus's service
# discovery plugins (cloud SDKs), which rule checks and unit tests never use: half the build.
$(PROMTOOL) $(PROMQL_METRICS): PROMTOOL_MODULE_CHECK = grep -qE '^(require)?[[:space:]]*github.com/prometheus/prometheus $(PROMETHEUS_VERSION)$$' hack/tools/promtool/go.mod || \
	{ echo "hack/tools/promtool/go.mod does not require github.com/prometheus/prometheus $(PROMETHEUS_VERSION) (PROMETHEUS_VERSION): change both together" >&2; exit 1; }

$(PROMTOOL):
	@$(PROMTOOL_MODULE_CHECK)
	cd hack/tools/promtool && GOFLAGS=-mod=readonly go build -trimpath -tags remove_all_sd \
		-ldflags "-s -w -X github.com/prometheus/common/version.Version=$(PROMETHEUS_VERSION:v%=%)" \
		-o $@.tmp github.com/prometheus/prometheus/cmd/promtool
	mv $@.tmp $@

$(PROMQL_METRICS):
	@$(PROMTOOL_MODULE_CHECK)
	cd hack/tools/promtool && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o $@.tmp ./promql-metrics
	mv $@.tmp $@

.PHONY: validate-krew-manifest
validate-krew-manifest: $(VALIDATE_KREW_MANIFEST) ## Build krew's manifest checker into bin/ (only when missing).

# hack/tools/krew/go.mod must require krew $(KREW_VERSION); its go.sum is the trust root.
$(VALIDATE_KREW_MANIFEST):
	@grep -qE '^(require)?[[:space:]]*sigs.k8s.io/krew $(KREW_VERSION)$$' hack/tools/krew/go.mod || \
		{ echo "hack/tools/krew/go.mod does not require sigs.k8s.io/krew $(KREW_VERSION) (KREW_VERSION): change both together" >&2; exit 1; }
	cd hack/tools/krew && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o $@.tmp sigs.k8s.io/krew/cmd/validate-krew-manifest
	mv $@.tmp $@

.PHONY: cosign
cosign: $(COSIGN) ## Build sigstore's cosign into bin/ (only when missing).

# hack/tools/cosign/go.mod must require cosign $(COSIGN_VERSION); its go.sum is the trust root.
# The version ldflag is cosign's own (its Makefile's), so `cosign version` says which it is.
$(COSIGN):
	@grep -qE '^(require)?[[:space:]]*github.com/sigstore/cosign/v2 $(COSIGN_VERSION)$$' hack/tools/cosign/go.mod || \
		{ echo "hack/tools/cosign/go.mod does not require github.com/sigstore/cosign/v2 $(COSIGN_VERSION) (COSIGN_VERSION): change both together" >&2; exit 1; }
	cd hack/tools/cosign && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath \
		-ldflags "-s -w -X sigs.k8s.io/release-utils/version.gitVersion=$(COSIGN_VERSION)" \
		-o $@.tmp github.com/sigstore/cosign/v2/cmd/cosign
	mv $@.tmp $@

.PHONY: krew
krew: $(KREW) ## Build krew, the kubectl plugin manager, into bin/ (only when missing).

$(KREW):
	@grep -qE '^(require)?[[:space:]]*sigs.k8s.io/krew $(KREW_VERSION)$$' hack/tools/krew/go.mod || \
		{ echo "hack/tools/krew/go.mod does not require sigs.k8s.io/krew $(KREW_VERSION) (KREW_VERSION): change both together" >&2; exit 1; }
	cd hack/tools/krew && GOFLAGS=-mod=readonly go build -trimpath -ldflags "-s -w" -o $@.tmp sigs.k8s.io/krew/cmd/krew
	mv $@.tmp $@

# hack/tools/caddy/go.mod must require caddy $(CADDY_VERSION); its go.sum is the trust root.
$(CADDY):
	@grep -q 'github.com/caddyserver/caddy/v2 $(CADDY_VERSION)$$' hack/tools/caddy/go.mod || \
		{ echo "hack/tools/caddy/go.mod does not require caddy $(CADDY_VERSION) (CADDY_VERSION): change both together" >&2; exit 1; }
	GOFLAGS=-mod=mod go build -C hack/tools/caddy -trimpath -ldflags "-s -w" -o $@.tmp .
	mv $@.tmp $@
