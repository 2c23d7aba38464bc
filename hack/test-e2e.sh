#!/usr/bin/env bash
# The end-to-end suite: the real binaries (bin/switchboard dev, bin/kubectl-switchboard, kubectl
# from bin/k8s) driven as a user would. `make test-e2e` builds them first.
set -euo pipefail
cd "$(dirname "$0")/.."

for bin in bin/switchboard bin/kubectl-switchboard "${KUBEBUILDER_ASSETS:-bin/k8s/$(cat hack/kube-version)}/kubectl"; do
	if [[ ! -x "$bin" ]]; then
		echo "test-e2e: $bin is missing: run \`make build envtest\` (or \`make test-e2e\`)" >&2
		exit 1
	fi
done

start=$(date +%s)
go test -tags e2e -count=1 -timeout 15m -v ./test/e2e/... "$@"
echo "test-e2e: passed in $(( $(date +%s) - start ))s"
