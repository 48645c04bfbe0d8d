// SPDX-License-Identifier: Apache-2.0
/*
 * harp-cuda-abi: what the plugin declares of CUDA's runtime for a build without CUDA's headers
 * (nccl-net/cuda_fallback.h), held against CUDA's own headers (built only where the build found
 * them: /usr/local/cuda here, CUDA 13). Checks each value the fallback names, the size of each
 * type it passes in a call's place, and the pointer attributes' field offsets, with room for the
 * whole struct the runtime writes. CUDA 12's struct is the first four fields of CUDA 13's (24
 * bytes against 88); the check holds for the headers at hand, and the fallback's room (32 longs
 * of reserve) covers both.
 *
 * Prints one line per check and result=ok or result=FAIL; exits 0 or 1.
 */
#include <stddef.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "cuda_fallback.h"

static int failed;

static void check(int ok, const char *what, long long ours, long long cuda)
{
	printf("%-44s ours %lld, CUDA %d.%d's %lld: %s\n", what, ours, CUDART_VERSION / 1000,
	       CUDART_VERSION % 1000 / 10, cuda, ok ? "ok" : "WRONG");
	failed |= !ok;
}

#define SAME(what, ours, cuda) check((long long)(ours) == (long long)(cuda), what, ours, cuda)

int main(void)
{
	SAME("cudaSuccess", HP_CUDA_SUCCESS, cudaSuccess);
	SAME("cudaErrorHostMemoryAlreadyRegistered", HP_CUDA_ERR_HOST_REGISTERED,
	     cudaErrorHostMemoryAlreadyRegistered);
	SAME("cudaMemcpyDefault", HP_CUDA_MEMCPY_DEFAULT, cudaMemcpyDefault);
	SAME("cudaStreamNonBlocking", HP_CUDA_STREAM_NON_BLOCKING, cudaStreamNonBlocking);
	SAME("cudaMemoryTypeDevice", HP_CUDA_MEMORY_TYPE_DEVICE, cudaMemoryTypeDevice);
	/* the types in a call's place: an error returned, a stream and a copy kind passed */
	SAME("sizeof(cudaError_t)", sizeof(hp_cuda_err), sizeof(cudaError_t));
	SAME("sizeof(cudaStream_t)", sizeof(hp_cuda_stream), sizeof(cudaStream_t));
	SAME("sizeof(enum cudaMemcpyKind) (passed as int)", sizeof(int),
	     sizeof(enum cudaMemcpyKind));
	SAME("sizeof(enum cudaMemoryType) (the type field)",
	     sizeof(((struct hp_cuda_ptr_attrs *)0)->type), sizeof(enum cudaMemoryType));
	/* the pointer attributes: each field where CUDA has it, and room for all it writes */
	SAME("offsetof(cudaPointerAttributes, type)", offsetof(struct hp_cuda_ptr_attrs, type),
	     offsetof(struct cudaPointerAttributes, type));
	SAME("offsetof(cudaPointerAttributes, device)", offsetof(struct hp_cuda_ptr_attrs, device),
	     offsetof(struct cudaPointerAttributes, device));
	SAME("offsetof(cudaPointerAttributes, devicePointer)",
	     offsetof(struct hp_cuda_ptr_attrs, devicePointer),
	     offsetof(struct cudaPointerAttributes, devicePointer));
	SAME("offsetof(cudaPointerAttributes, hostPointer)",
	     offsetof(struct hp_cuda_ptr_attrs, hostPointer),
	     offsetof(struct cudaPointerAttributes, hostPointer));
	check(sizeof(struct hp_cuda_ptr_attrs) >= sizeof(struct cudaPointerAttributes),
	      "sizeof(cudaPointerAttributes), at least", (long long)sizeof(struct hp_cuda_ptr_attrs),
	      (long long)sizeof(struct cudaPointerAttributes));
	printf("result=%s\n", failed ? "FAIL" : "ok");
	return failed;
}
