// SPDX-License-Identifier: Apache-2.0
/*
 * A stand-in for NCCL's libnccl.so.2, built as one for test_nccl_socket: what perf/nccl_socket.c
 * looks for is here, as NCCL has it. ncclNetSocket and cudaGetDevice are local symbols (static),
 * found only in the ELF symbol table; cudaGetDevice fails as the CUDA runtime does without a
 * driver (35, cudaErrorInsufficientDriver) until the loader rewrites it. ncclGetVersion reports
 * FAKE_NCCL_VERSION (default 22809, NCCL 2.28.9).
 */
#include <stdlib.h>

__attribute__((noinline, used)) static int cudaGetDevice(int *device)
{
	*device = -1;
	return 35;
}

/* The table's first members as the test reads them: a name, then a function to call. */
struct fake_net {
	const char *name;
	int (*get_device)(int *device);
};

__attribute__((used)) static const struct fake_net ncclNetSocket = { "Socket", cudaGetDevice };

int ncclGetVersion(int *version)
{
	const char *v = getenv("FAKE_NCCL_VERSION");

	*version = v ? atoi(v) : 22809;
	return 0;
}
