# syntax=docker/dockerfile:1
# SPDX-License-Identifier: Apache-2.0
#
# A stand-in training image for the container tests, made the way container/README.md tells
# users to make theirs: a base image, what the plugin needs from it (libelf1, zlib1g), and the
# whole plugin layer copied in (COPY --from=<plugin image> / /). Instead of NCCL it carries
# harp-net-driver, which opens libnccl-net.so by name as NCCL does with NCCL_NET_PLUGIN unset.
# The build context is a directory holding harp-net-driver alone.
ARG BASE
ARG PLUGIN
FROM ${PLUGIN} AS plugin

FROM ${BASE}
RUN apt-get update \
	&& apt-get install -y --no-install-recommends libelf1 zlib1g \
	&& rm -rf /var/lib/apt/lists/*
COPY --from=plugin / /
COPY harp-net-driver /usr/local/bin/harp-net-driver
ENTRYPOINT ["/usr/local/bin/harp-net-driver"]
