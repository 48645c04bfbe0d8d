/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A caller's view of any NCCL net plugin: dlsym() its ncclNetPlugin_v8..v12 table and call every
 * version through one API shaped like the newest, converting sizes, properties and init the way
 * NCCL's own version layers do. One plugin table per process (the wrappers keep it in statics).
 * harp-net-driver tests plugins through it, harp-perf measures them.
 */
#ifndef HARP_NET_SHIM_H
#define HARP_NET_SHIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_net_abi.h"

#define NET_SHIM_MAX_GROUP 8 /* buffers in one grouped receive: NCCL's NCCL_NET_MAX_RECVS */

/* Every version's properties, read into one struct; members a version lacks get fixed values. */
struct net_props {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support, reg_is_global, force_flush, speed, port;
	float latency;
	int max_comms, max_recvs;
	int net_device_type, net_device_version;
	int vndevs;
	int vdevs[HNCCL_NET_MAX_DEVS_PER_NIC_V12];
	size_t max_p2p_bytes, max_coll_bytes;
	int max_multi_request_size;
	int rail_id, plane_id;
};

struct net_api {
	int version;
	const void *table; /* the ncclNetPlugin_v<version> table itself */
	const char *name;
	bool preset_optional_recv; /* v9 on: NCCL may preset *request to 0x1 before irecv */
	hnccl_result_t (*init)(void **ctx, uint64_t comm_id);
	hnccl_result_t (*finalize)(void *ctx); /* NULL before v11 */
	hnccl_result_t (*devices)(int *ndev);
	hnccl_result_t (*get_properties)(int dev, struct net_props *props, int poison);
	hnccl_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
	hnccl_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
				  struct hnccl_net_device_handle **dev_handle);
	hnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct hnccl_net_device_handle **dev_handle);
	hnccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	hnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	hnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	hnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	hnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	hnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	hnccl_result_t (*test)(void *request, int *done, int *sizes);
	hnccl_result_t (*close_send)(void *send_comm);
	hnccl_result_t (*close_recv)(void *recv_comm);
	hnccl_result_t (*close_listen)(void *listen_comm);
	hnccl_result_t (*set_net_attr)(void *ctx, struct hnccl_net_attr *attr); /* may be NULL */
};

/*
 * Loads table ncclNetPlugin_v<version> from lib (a dlopen() handle) into api; init passes logger
 * and profiler (NULL: none) to the plugin. 0, or -1 with the reason in err.
 */
int net_api_load(struct net_api *api, void *lib, int version, hnccl_logger_fn logger,
		 hnccl_profiler_fn profiler, char *err, size_t errlen);
/* The same for a table of that version found some other way (perf/nccl_socket.h). */
int net_api_bind(struct net_api *api, const void *table, int version, hnccl_logger_fn logger,
		 hnccl_profiler_fn profiler, char *err, size_t errlen);

/* ncclResult_t's name, e.g. "ncclRemoteError". */
const char *net_res_name(hnccl_result_t res);

#endif
