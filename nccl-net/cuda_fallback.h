/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the plugin declares of CUDA's runtime itself, for a build that found no CUDA headers
 * (cuda.c takes CUDA's own cuda_runtime_api.h wherever there is one). Every value here is
 * checked against the real headers by tests/plugin/cuda_abi.c, and the copies built this way
 * run against a stand-in libcudart built from the real headers (plugin_cuda_lanes_fallback).
 */
#ifndef HARP_NCCL_CUDA_FALLBACK_H
#define HARP_NCCL_CUDA_FALLBACK_H

typedef int hp_cuda_err;      /* cudaError_t, an enum */
typedef void *hp_cuda_stream; /* cudaStream_t, a pointer */

/*
 * cudaPointerAttributes: memory type, device, two pointers, then the reserved words CUDA 13
 * added (long reserved[8]: 88 bytes in all; CUDA 12 has the first four fields, 24 bytes). The
 * runtime writes the whole struct of its own version, so this one has room for more than that:
 * a struct of only the four fields had CUDA 13 write 64 bytes past it (issue gpu).
 */
struct hp_cuda_ptr_attrs {
	int type; /* enum cudaMemoryType */
	int device;
	void *devicePointer;
	void *hostPointer;
	long reserved[32];
};

#define HP_CUDA_SUCCESS		    0	/* cudaSuccess */
#define HP_CUDA_ERR_HOST_REGISTERED 712 /* cudaErrorHostMemoryAlreadyRegistered */
#define HP_CUDA_MEMCPY_DEFAULT	    4	/* cudaMemcpyDefault: the direction from the pointers */
#define HP_CUDA_STREAM_NON_BLOCKING 1	/* cudaStreamNonBlocking */
#define HP_CUDA_MEMORY_TYPE_DEVICE  2	/* cudaMemoryTypeDevice */

#endif
