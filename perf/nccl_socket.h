/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's own socket transport, the baseline harp is measured against, reached without a GPU
 * (perf/nccl_socket.c). NCCL keeps it as an internal net table, ncclNetSocket, in the layout of
 * the net plugin API of its release; harp-perf drives it as it drives any plugin's table.
 */
#ifndef HARP_PERF_NCCL_SOCKET_H
#define HARP_PERF_NCCL_SOCKET_H

#include <stddef.h>

/* What harp-perf --plugin takes to mean this transport rather than a file. */
#define NCCL_SOCKET_NAME "nccl-socket"

/*
 * Finds and loads libnccl.so.2, in this order: NCCL_LIB (the file, or a directory holding it);
 * the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache); CUDA's lib64 and lib under
 * CUDA_HOME, /usr/local/cuda and /usr/local/cuda-*; a Python environment's nvidia/nccl/lib
 * (the nvidia-nccl wheels: VIRTUAL_ENV, CONDA_PREFIX, PYTHONPATH, ~/.local, /usr/local and
 * /usr). Locates ncclNetSocket and makes NCCL's CUDA device calls answer "device 0" (its socket
 * code asks for the current device; with no GPU that fails). On success returns 0, the table in
 * *table, its plugin API version (8 to 11) in *version and one line naming the library and
 * NCCL's release in what. Else -1 with what saying what was wrong: every place searched and
 * how to name the library, or why the one found cannot serve.
 */
int nccl_socket_open(const void **table, int *version, char *what, size_t whatlen);

#endif
