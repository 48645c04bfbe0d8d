/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPU buffers (HARP_CUDA=on): libcudart loaded at run time, and the copies between GPU memory and
 * harp's frames that harp_ctx__set_device() takes (cuda.c).
 */
#ifndef HARP_NCCL_CUDA_H
#define HARP_NCCL_CUDA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct harp_ctx;
struct hp_cuda_dev;

/* Loads libcudart once: true when it and a GPU are there; either way one INFO line says so. */
bool hp_cuda_start(void);
/* ctx's copies on streams of their own (*out, for hp_cuda_detach); 0 or a negative errno. */
int hp_cuda_attach(struct harp_ctx *ctx, struct hp_cuda_dev **out);
/* Whether copies of scattered pieces go in one cudaMemcpyBatchAsync call (CUDA 13). */
bool hp_cuda_batching(void);
/* What a device's copies did, over all its lanes. */
struct hp_cuda_stats {
	uint64_t calls;	      /* cudaMemcpyAsync and cudaMemcpy2DAsync calls */
	uint64_t pieces;      /* the harp_copy pieces they moved (a 2D call takes several) */
	uint64_t bytes;	      /* and their bytes */
	uint64_t waits;	      /* cudaStreamSynchronize calls, each an engine pass waiting */
	uint64_t wait_ns;     /* time in them */
	uint64_t wait_max_ns; /* the longest */
};
/* After ctx is destroyed: says what its copies cost (INFO), and its streams go. Accepts NULL. */
void hp_cuda_detach(struct hp_cuda_dev *d);
/* d's figures so far (zeros for NULL). */
void hp_cuda_stats(const struct hp_cuda_dev *d, struct hp_cuda_stats *out);
/*
 * After hp_cuda_start() found CUDA. 0 when addr+len is memory of this process's GPU, its first
 * and its last byte; else -EINVAL and why (a range that runs past its allocation's end, too).
 */
int hp_cuda_check(const void *addr, size_t len, char *why, size_t whylen);
/* Likewise: 0 when neither the first nor the last byte of addr+len is GPU memory. */
int hp_cuda_check_host(const void *addr, size_t len, char *why, size_t whylen);

#endif
