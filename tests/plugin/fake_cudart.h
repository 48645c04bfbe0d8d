/* SPDX-License-Identifier: Apache-2.0 */
/* The stand-in libcudart's counts (fake_cudart.c), read by harp-net-driver --cuda. */
#ifndef HARP_FAKE_CUDART_H
#define HARP_FAKE_CUDART_H

#include <stddef.h>
#include <stdint.h>

#define FAKE_CUDART_MAX_DEVICES 8 /* FAKE_CUDART_DEVICES takes 1 to this */

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
	/* Devices (FAKE_CUDART_DEVICES), each thread's current one as the runtime keeps it */
	uint64_t devices;	     /* how many there are */
	uint64_t stream_devices;     /* bit d: a stream was created while device d was current */
	uint64_t copy_devices;	     /* bit d: a copy was queued while device d was current */
	uint64_t copies_off_device;  /* copies queued while another device than their device
				      * memory's was current */
	uint64_t copies_off_stream;  /* copies queued on a stream of another device than their
				      * device memory's */
	uint64_t waits_off_device;   /* waits while another device than the stream's was current */
	uint64_t outside_allocation; /* copies whose device side is not inside one allocation */
	uint64_t batch_calls;	     /* cudaMemcpyBatchAsync calls (counted in async_calls too) */
	uint64_t batch_refused;	     /* of those, refused for arguments the runtime refuses */
};

void fake_cudart_report(struct fake_cudart_report *out);

#endif
