# switchboard — the Connections API as a Kubernetes operator.
# `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

LOCALBIN ?= $(CURDIR)/bin
# hack/kube-version pins the Kubernetes release of the control plane (envtest, switchboard dev).
KUBE_VERSION ?= $(shell cat hack/kube-version)
ENVTEST_ASSETS ?= $(LOCALBIN)/k8s/$(KUBE_VERSION)
export KUBEBUILDER_ASSETS ?= $(ENVTEST_ASSETS)

CONTROLLER_TOOLS_VERSION ?= v0.23.0
GOLANGCI_LINT_VERSION ?= v2.15.0
HELM_VERSION ?= v3.22.0

CONTROLLER_GEN ?= $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
HELM ?= $(LOCALBIN)/helm-$(HELM_VERSION)

GO_TEST_FLAGS ?= -count=1
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X github.com/switchboard-dev/switchboard/internal/version.Version=$(VERSION)

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-14s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC from the markers in api/ and controllers/.
	$(CONTROLLER_GEN) rbac:roleName=switchboard-operator crd:allowDangerousTypes=false paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	@rm -rf internal/crds/bases && mkdir -p internal/crds/bases && cp config/crd/bases/*.yaml internal/crds/bases/
	@mkdir -p charts/switchboard/crds && cp config/crd/bases/*.yaml charts/switchboard/crds/

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

.PHONY: envtest
envtest: ## Build etcd, kube-apiserver and kubectl from source into bin/k8s/ (only when missing).
	KUBE_VERSION=$(KUBE_VERSION) ENVTEST_ASSETS=$(ENVTEST_ASSETS) hack/envtest.sh

.PHONY: test
test: manifests generate envtest $(HELM) ## Run every test against a real kube-apiserver + etcd (unit, envtest, chart, fuzz seeds, e2e).
	go test $(GO_TEST_FLAGS) ./...
	$(MAKE) test-e2e

.PHONY: test-e2e
test-e2e: build envtest ## Run the end-to-end suite on the real binaries (switchboard dev, kubectl, the plugin, HTTP).
	hack/test-e2e.sh

.PHONY: bench
bench: build envtest ## Measure and write docs/benchmarks.md (needs wrk; about 45 minutes on 2 cores, most of it the 100k-object scale part).
	go run ./hack/bench -out docs/benchmarks.md

##@ Build

.PHONY: build
build: ## Build bin/switchboard and bin/kubectl-switchboard.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/switchboard ./cmd/switchboard
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/kubectl-switchboard ./cmd/kubectl-switchboard

.PHONY: dev
dev: build envtest ## Run the whole system on an embedded local control plane.
	$(LOCALBIN)/switchboard dev --assets $(ENVTEST_ASSETS)

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

$(HELM):
	GOBIN=$(LOCALBIN) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	mv $(LOCALBIN)/helm $@
