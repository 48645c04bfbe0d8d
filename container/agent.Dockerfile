# syntax=docker/dockerfile:1
# SPDX-License-Identifier: Apache-2.0
#
# harp's node agent: harp-attach and what it runs (xdp-loader, bpftool, ethtool, ip, mount),
# for the Helm chart's DaemonSet. Build from the repository root:
#   docker build -f container/agent.Dockerfile -t harp/agent:0.1.0 .

# The base images, overridable with --build-arg (a mirror, a pinned digest, or the local base
# image the container tests build with debootstrap).
ARG BUILD_BASE=debian:12
ARG RUNTIME_BASE=debian:12-slim

# The build stage is the same in plugin.Dockerfile (tests/deploy checks that they match), so a
# builder with a cache builds it once for both images. Build dependencies are the build lines of
# scripts/setup.sh; tests are off, so cmocka is not needed, nor the fault injector.
FROM ${BUILD_BASE} AS build
RUN apt-get update \
	&& apt-get install -y --no-install-recommends \
		clang llvm libbpf-dev libxdp-dev bpftool libelf-dev zlib1g-dev \
		cmake make gcc libc6-dev pkg-config libsodium-dev \
	&& rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/opt/harp \
		-DHARP_TESTS=OFF -DHARP_FAULT_INJECTION=OFF \
	&& cmake --build /build -j"$(nproc)" \
	&& cmake --install /build

FROM ${RUNTIME_BASE}
# harp-attach is bash; it loads and pins with xdp-loader (xdp-tools) and bpftool, sets queues with
# ethtool, reads links with ip (iproute2), mounts bpffs (mount, util-linux) and reads sysctls
# (procps). libbpf1 and libxdp1 are what harp's own tools link; libxdp1 also holds the XDP
# dispatcher that xdp-loader loads from disk.
RUN apt-get update \
	&& apt-get install -y --no-install-recommends \
		xdp-tools bpftool ethtool iproute2 libbpf1 libxdp1 util-linux mount procps \
	&& rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/harp /opt/harp
ENTRYPOINT ["/opt/harp/sbin/harp-attach"]
