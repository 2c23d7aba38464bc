#!/usr/bin/env bash
# Builds the previous release the cluster suite upgrades from, once per pin: its image (as
# `make image` built it then) and its chart, both from git, into bin/previous/<commit>/
# (switchboard.tar, chart/, image-name). hack/previous-release pins it: a tag once one exists,
# until then the commit of main before the chart's CRDs moved into its templates.
set -euo pipefail
cd "$(dirname "$0")/.."

pin=$(tr -d '[:space:]' < hack/previous-release)
if ! commit=$(git rev-parse --verify --quiet "$pin^{commit}"); then
	if [[ $(git rev-parse --is-shallow-repository) == true ]]; then
		echo "previous-release: $pin is not in this shallow clone: git fetch --depth=1 origin $pin (or git fetch --unshallow)" >&2
	else
		echo "previous-release: $pin (hack/previous-release) is no commit or tag here: git fetch origin $pin" >&2
	fi
	exit 1
fi
out=bin/previous/$commit
if [[ -f $out/switchboard.tar && -d $out/chart ]]; then
	exit 0
fi
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/src" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
git worktree add --detach "$tmp/src" "$commit" >/dev/null
mkdir -p "$tmp/out"
version=$(git describe --tags --always "$commit")
# The previous commit's own Makefile and hack/image build its image, as they did then.
make -C "$tmp/src" --no-print-directory image IMAGE_DIR="$tmp/out" VERSION="$version" REVISION="$commit" IMAGE_REPO=localhost/switchboard-previous
git archive "$commit" charts/switchboard | tar -x -C "$tmp/out"
mv "$tmp/out/charts/switchboard" "$tmp/out/chart"
rmdir "$tmp/out/charts"
echo "localhost/switchboard-previous:$version" > "$tmp/out/image-name"
rm -f "$tmp/out/switchboard"
mkdir -p "$(dirname "$out")"
rm -rf "$out"
mv "$tmp/out" "$out"
echo "previous-release: $version ($commit) in $out"
