#!/usr/bin/env bash
# Puts the Kubernetes binaries into bin/k8s/<version>/, each only when missing:
#   (no arguments)  what `switchboard dev` runs: etcd, kube-apiserver and kubectl;
#   --tests         also kube-controller-manager, which the tenant-role tests run;
#   --cluster       also the rest of a node for test/cluster and `make cluster`: kube-scheduler,
#                   the kubelet and kube-proxy.
# hack/envtest-fetch downloads each from Kubernetes' and etcd's releases when hack/envtest.sha512
# (ENVTEST_PINS) pins its SHA-512 and the release can be reached (ENVTEST_KUBERNETES_URL,
# ENVTEST_ETCD_URL); it says which it cannot and why, and those are built from source through the
# Go module proxy: etcd from go.etcd.io/etcd/server, the others from k8s.io/kubernetes. The
# version is pinned once, in hack/kube-version, which must match the tools module's go.mod;
# etcd's is the one hack/tools/envtest/etcd/go.mod requires.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
version=${KUBE_VERSION:-$(cat "$root/hack/kube-version")}
# The version names the directory and is stamped into the binaries: it must be the release the
# module below builds.
if ! grep -qE "^(require)?[[:space:]]*k8s.io/kubernetes v${version//./\\.}\$" "$root/hack/tools/envtest/kubernetes/go.mod"; then
	echo "envtest: hack/tools/envtest/kubernetes/go.mod does not require k8s.io/kubernetes v$version (hack/kube-version or KUBE_VERSION): change both together" >&2
	exit 1
fi
dest=${ENVTEST_ASSETS:-$root/bin/k8s/$version}
mkdir -p "$dest"

# Several worktrees share one bin/k8s: one build at a time, and a binary built by another
# while this one waited is not built again.
exec 9>"$dest/.build.lock"
flock 9

build() { # build NAME MODULE_DIR PACKAGE [LDFLAGS]
	local name=$1 dir=$2 pkg=$3 ldflags=${4:-}
	if [[ -x $dest/$name ]]; then
		return
	fi
	echo "envtest: building $name $([[ $name == etcd ]] && echo "$etcd_version" || echo "$version") from source (first time only, a few minutes on 2 cores)…" >&2
	local start=$SECONDS
	# The committed go.sum is the trust root: the checksum database does not serve k8s.io/kubernetes.
	(cd "$root/hack/tools/envtest/$dir" && GOFLAGS=-mod=readonly GONOSUMDB=k8s.io \
		go build -trimpath -ldflags "-s -w $ldflags" -o "$dest/$name.tmp" "$pkg")
	mv "$dest/$name.tmp" "$dest/$name"
	echo "envtest: built $name in $((SECONDS - start))s" >&2
}

etcd_version=$(sed -nE 's/^(require)?[[:space:]]*go\.etcd\.io\/etcd\/server\/v3 v([^[:space:]]+)$/\2/p' "$root/hack/tools/envtest/etcd/go.mod")
bins=(etcd kube-apiserver kubectl)
# Its clusterrole-aggregation controller fills the built-in roles in the tenant-role tests; the
# cluster runs it too.
if [[ ${1:-} == --tests || ${1:-} == --cluster ]]; then
	bins+=(kube-controller-manager)
fi
if [[ ${1:-} == --cluster ]]; then
	bins+=(kube-scheduler kubelet kube-proxy)
fi

# Download what is missing when it can be; what it cannot is built below.
missing=()
for b in "${bins[@]}"; do
	[[ -x $dest/$b ]] || missing+=("$b")
done
if ((${#missing[@]})); then
	fetch_bin=$(mktemp -d)
	trap 'rm -rf "$fetch_bin"' EXIT
	(cd "$root" && go build -o "$fetch_bin/envtest-fetch" ./hack/envtest-fetch)
	"$fetch_bin/envtest-fetch" -version "$version" -etcd-version "$etcd_version" -dest "$dest" \
		-pins "${ENVTEST_PINS:-$root/hack/envtest.sha512}" "${missing[@]}"
fi

kube_ldflags="-X k8s.io/component-base/version.gitVersion=v$version -X k8s.io/component-base/version.gitMajor=${version%%.*} -X k8s.io/component-base/version.gitMinor=$(echo "$version" | cut -d. -f2)"
build etcd etcd .
for b in "${bins[@]:1}"; do
	build "$b" kubernetes "k8s.io/kubernetes/cmd/$b" "$kube_ldflags"
done
echo "$dest"
