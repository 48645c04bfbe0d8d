/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plugin, written once against the newest NCCL net API (v12's calls with size_t sizes, a
 * per-communicator context and a properties struct of our own); adapters.c turns it into the
 * ncclNetPlugin_v8 ... v12 tables NCCL looks up. Nothing here is exported.
 */
#ifndef HARP_NCCL_PLUGIN_H
#define HARP_NCCL_PLUGIN_H

#include <stdbool.h>

#include "nccl_net_abi.h"

#define HP_MAX_DEVS 16
#define HP_MAX_RECVS 8 /* = HARP_RECV_MAX_BUFS */

/* What getProperties reports for a device, before each version lays it out. */
struct hp_props {
	char *name;
	char *pci_path; /* NULL for a virtual interface */
	uint64_t guid;
	int ptr_support;
	int speed; /* Mbit/s */
	float latency;
	int max_comms;
	int max_recvs;
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
};

/* ctx: the context init returned, or NULL for the v8-v10 tables (one context per process). */
hnccl_result_t hp_init(void **ctx, uint64_t comm_id, const struct hnccl_comm_config *config,
		       hnccl_logger_fn logger, hnccl_profiler_fn profiler);
hnccl_result_t hp_finalize(void *ctx);
hnccl_result_t hp_devices(int *ndev);
hnccl_result_t hp_properties(int dev, struct hp_props *props);
hnccl_result_t hp_listen(void *ctx, int dev, void *handle, void **listen_comm);
hnccl_result_t hp_connect(void *ctx, int dev, void *handle, void **send_comm,
			  struct hnccl_net_device_handle **dev_handle);
hnccl_result_t hp_accept(void *listen_comm, void **recv_comm,
			 struct hnccl_net_device_handle **dev_handle);
hnccl_result_t hp_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
hnccl_result_t hp_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				int fd, void **mhandle);
hnccl_result_t hp_dereg_mr(void *comm, void *mhandle);
hnccl_result_t hp_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			void **request);
hnccl_result_t hp_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
			void **mhandles, void **request);
hnccl_result_t hp_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			 void **request);
hnccl_result_t hp_test(void *request, int *done, int *sizes);
hnccl_result_t hp_close_send(void *send_comm);
hnccl_result_t hp_close_recv(void *recv_comm);
hnccl_result_t hp_close_listen(void *listen_comm);
hnccl_result_t hp_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle);
hnccl_result_t hp_irecv_consumed(void *recv_comm, int n, void *request);
hnccl_result_t hp_set_net_attr(void *ctx, const struct hnccl_net_attr *attr);

#endif
