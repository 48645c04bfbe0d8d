# syntax=docker/dockerfile:1
# SPDX-License-Identifier: Apache-2.0
#
# harp's NCCL plugin as a layer for training images to copy from; it is FROM scratch and runs
# nothing. Build from the repository root:
#   docker build -f container/plugin.Dockerfile -t harp/plugin:0.1.0 .
# and in a training image, either all of it, so that NCCL takes harp with no variable set (it
# opens libnccl-net.so when NCCL_NET_PLUGIN is unset, and /usr/lib/libnccl-net.so links to harp):
#   COPY --from=harp/plugin:0.1.0 / /
# or /opt/harp alone, with NCCL_NET_PLUGIN=/opt/harp/lib/libnccl-net-harp.so in the job:
#   COPY --from=harp/plugin:0.1.0 /opt/harp /opt/harp
#
# /opt/harp/lib holds libnccl-net-harp.so, its alias libnccl-net.so, and Debian 12's libbpf.so.1
# and libxdp.so.1 (PyTorch images are Ubuntu, and Ubuntu 22.04 has no libbpf.so.1), and
# libsodium.so.23, which the plugin loads only under HARP_AUTH=1. The plugin
# finds them through its RUNPATH ($ORIGIN, then /opt/harp/lib for the link in /usr/lib) whatever
# LD_LIBRARY_PATH says. They need libelf.so.1 and libz.so.1 and glibc 2.34 or later from the
# image (Ubuntu 22.04: libelf1, zlib1g, glibc 2.35).

# The base images, overridable with --build-arg (a mirror, a pinned digest, or the local base
# image the container tests build with debootstrap).
ARG BUILD_BASE=debian:12

# The build stage is agent.Dockerfile's, word for word (tests/deploy checks that they match).
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

FROM build AS layer
RUN multiarch="$(gcc -print-multiarch)" \
	&& mkdir -p /layer/opt/harp/lib /layer/usr/lib \
	&& cp /opt/harp/lib/libnccl-net-harp.so /layer/opt/harp/lib/ \
	&& cp -P /opt/harp/lib/libnccl-net.so /layer/opt/harp/lib/ \
	&& ln -s /opt/harp/lib/libnccl-net-harp.so /layer/usr/lib/libnccl-net.so \
	&& cp -L "/usr/lib/$multiarch/libbpf.so.1" "/usr/lib/$multiarch/libxdp.so.1" \
		"/usr/lib/$multiarch/libsodium.so.23" /layer/opt/harp/lib/

FROM scratch
COPY --from=layer /layer /
