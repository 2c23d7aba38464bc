#!/usr/bin/env bash
# The cluster suite: test/cluster on a one-node cluster that internal/local/cluster builds from parts
# (needs root). `make test-cluster` builds its binaries and images first.
set -euo pipefail
cd "$(dirname "$0")/.."

assets=${KUBEBUILDER_ASSETS:-bin/k8s/$(cat hack/kube-version)}
# The suite cuts and signs the release itself (hack/release, with validate-krew-manifest and cosign), installs the plugin
# with krew, and upgrades from the previous release (`make previous-release`).
previous=bin/previous/$(git rev-parse --verify --quiet "$(tr -d '[:space:]' < hack/previous-release)^{commit}" || echo unknown)
for f in bin/image/pause.tar bin/image/consumer.tar bin/kubectl-switchboard "${HELM:-bin/helm-v3.22.0}" \
	"${KREW:-bin/krew-v0.4.3}" "${VALIDATE_KREW_MANIFEST:-bin/validate-krew-manifest-v0.4.3}" "${COSIGN:-bin/cosign-v2.6.5}" "$previous/switchboard.tar" \
	"$assets"/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy,kubectl}; do
	if [[ ! -e "$f" ]]; then
		echo "test-cluster: $f is missing: run \`make test-cluster\` (it builds everything first)" >&2
		exit 1
	fi
done

start=$(date +%s)
go test -tags cluster -count=1 -timeout 20m -v ./test/cluster/... "$@"
echo "test-cluster: passed in $(( $(date +%s) - start ))s"
