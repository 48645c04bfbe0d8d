/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in libcudart's counts (fake_cudart.c), read by harp-net-driver --cuda. */
#ifndef HARP_FAKE_CUDART_H
#define HARP_FAKE_CUDART_H

#include <stddef.h>
#include <stdint.h>

struct fake_cudart_report {
	uint64_t copies_to_host, copies_to_device; /* asynchronous copies queued, each way */
	uint64_t bytes_to_host, bytes_to_device;
	uint64_t async_calls;	/* cudaMemcpyAsync and cudaMemcpy2DAsync calls */
	uint64_t grid_calls;	/* of those, cudaMemcpy2DAsync */
	uint64_t syncs;		/* cudaStreamSynchronize calls */
	uint64_t streams;	/* streams created */
	uint64_t host_registered, host_unregistered; /* cudaHostRegister, cudaHostUnregister */
	uint64_t host_unregistered_copies; /* copies whose host side was not registered memory */
	uint64_t host_unregistered_max;	   /* the longest of them, in bytes */
	uint64_t bad_direction; /* copies with both sides, or neither, in device memory */
	uint64_t dropped;	/* copies still queued when their stream was destroyed */
	uint64_t regions_now;	/* host regions registered at the time of the report */
	uint64_t failed_calls;	/* calls failed on purpose (FAKE_CUDART_FAIL_AFTER) */
};

/* cudaPointerAttributes as CUDA 11 and later lay it out */
struct fake_ptr_attrs {
	int type;
	int device;
	void *device_pointer;
	void *host_pointer;
};

void fake_cudart_report(struct fake_cudart_report *out);

#endif
