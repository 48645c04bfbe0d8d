// SPDX-License-Identifier: Apache-2.0
/*
 * The five tables NCCL looks up, each a thin shim over plugin.c. Only what differs between
 * versions lives here: the properties layout, int or size_t sizes, the profiler and config
 * arguments, and the per-communicator context (v11 on). The v8-v10 tables have no context and no
 * finalize: they share one context, made by their (once per process) init and released when
 * the library is unloaded.
 */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "plugin.h"

#define HP_EXPORT __attribute__((visibility("default")))
#define HP_PLUGIN_NAME "HARP"

/* ---- properties ---------------------------------------------------------------------------- */

/* Members every version shares, in the same order; NCCL does not clear the struct. */
#define FILL_PROPS_HEAD(out, p)                                                                 \
	do {                                                                                    \
		(out)->name = (p).name;                                                         \
		(out)->pciPath = (p).pci_path;                                                  \
		(out)->guid = (p).guid;                                                         \
		(out)->ptrSupport = (p).ptr_support;                                            \
		(out)->regIsGlobal = 0;                                                         \
		(out)->speed = (p).speed;                                                       \
		(out)->port = 0;                                                                \
		(out)->latency = (p).latency;                                                   \
		(out)->maxComms = (p).max_comms;                                                \
		(out)->maxRecvs = (p).max_recvs;                                                \
		(out)->netDeviceType = HNCCL_NET_DEVICE_HOST;                                   \
		(out)->netDeviceVersion = HNCCL_NET_DEVICE_INVALID_VERSION;                     \
	} while (0)

/* v9 on: forceFlush, a virtual NIC that is just this device, and the size limits. */
#define FILL_PROPS_V9(out, p, dev)                                                              \
	do {                                                                                    \
		FILL_PROPS_HEAD(out, p);                                                        \
		(out)->forceFlush = 0;                                                          \
		memset(&(out)->vProps, 0, sizeof((out)->vProps));                               \
		(out)->vProps.ndevs = 1;                                                        \
		(out)->vProps.devs[0] = (dev);                                                  \
		(out)->maxP2pBytes = (p).max_p2p_bytes;                                         \
		(out)->maxCollBytes = (p).max_coll_bytes;                                       \
	} while (0)

static hnccl_result_t props_v8(int dev, struct hnccl_props_v8 *out)
{
	struct hp_props p;
	hnccl_result_t res = hp_properties(dev, &p);

	if (res == HNCCL_SUCCESS) {
		FILL_PROPS_HEAD(out, p);
	}
	return res;
}

static hnccl_result_t props_v9(int dev, struct hnccl_props_v9 *out)
{
	struct hp_props p;
	hnccl_result_t res = hp_properties(dev, &p);

	if (res == HNCCL_SUCCESS) {
		FILL_PROPS_V9(out, p, dev);
	}
	return res;
}

static hnccl_result_t props_v10(int dev, struct hnccl_props_v10 *out)
{
	struct hp_props p;
	hnccl_result_t res = hp_properties(dev, &p);

	if (res == HNCCL_SUCCESS) {
		FILL_PROPS_V9(out, p, dev);
	}
	return res;
}

static hnccl_result_t props_v11(int dev, struct hnccl_props_v11 *out)
{
	struct hp_props p;
	hnccl_result_t res = hp_properties(dev, &p);

	if (res == HNCCL_SUCCESS) {
		FILL_PROPS_V9(out, p, dev);
		out->maxMultiRequestSize = 1;
	}
	return res;
}

static hnccl_result_t props_v12(int dev, struct hnccl_props_v12 *out)
{
	struct hp_props p;
	hnccl_result_t res = hp_properties(dev, &p);

	if (res == HNCCL_SUCCESS) {
		FILL_PROPS_V9(out, p, dev);
		out->maxMultiRequestSize = 1;
		out->railId = HNCCL_NET_ID_UNDEF;
		out->planeId = HNCCL_NET_ID_UNDEF;
	}
	return res;
}

/* ---- v8-v10: one context per process ---------------------------------------------------------- */

static void *legacy_ctx;

static hnccl_result_t legacy_init(hnccl_logger_fn logger)
{
	if (legacy_ctx) {
		return HNCCL_SUCCESS;
	}
	return hp_init(&legacy_ctx, 0, NULL, logger, NULL);
}

/* Unloading releases what the legacy init took. */
__attribute__((destructor)) static void legacy_unload(void)
{
	if (legacy_ctx) {
		hp_finalize(legacy_ctx);
		legacy_ctx = NULL;
	}
}

static hnccl_result_t init_v8(hnccl_logger_fn logger)
{
	return legacy_init(logger);
}

static hnccl_result_t init_v10(hnccl_logger_fn logger, hnccl_profiler_fn profiler)
{
	(void)profiler;
	return legacy_init(logger);
}

static hnccl_result_t listen_legacy(int dev, void *handle, void **listen_comm)
{
	return hp_listen(legacy_ctx, dev, handle, listen_comm);
}

static hnccl_result_t connect_v8(int dev, void *handle, void **send_comm,
				 struct hnccl_net_device_handle **dev_handle)
{
	return hp_connect(legacy_ctx, dev, handle, send_comm, dev_handle);
}

static hnccl_result_t connect_v10(int dev, struct hnccl_comm_config *config, void *handle,
				  void **send_comm, struct hnccl_net_device_handle **dev_handle)
{
	(void)config; /* a traffic class has no meaning on AF_XDP yet */
	return hp_connect(legacy_ctx, dev, handle, send_comm, dev_handle);
}

/* ---- data calls whose sizes or arguments differ --------------------------------------------- */

static hnccl_result_t isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle,
			       void **request)
{
	*request = NULL;
	if (size < 0) {
		HP_WARN("isend of %d bytes: a size cannot be negative", size);
		return HNCCL_INVALID_ARGUMENT;
	}
	return hp_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static hnccl_result_t irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags,
			       void **mhandles, void **request)
{
	size_t sz[HP_MAX_RECVS];
	int i;

	*request = NULL;
	if (n < 1 || n > HP_MAX_RECVS) {
		return hp_irecv(recv_comm, n, data, NULL, tags, mhandles, request); /* says why */
	}
	for (i = 0; i < n; i++) {
		if (sizes[i] < 0) {
			HP_WARN("irecv buffer %d of %d bytes: a size cannot be negative", i, sizes[i]);
			return HNCCL_INVALID_ARGUMENT;
		}
		sz[i] = (size_t)sizes[i];
	}
	return hp_irecv(recv_comm, n, data, sz, tags, mhandles, request);
}

static hnccl_result_t isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			       void **request)
{
	return hp_isend(send_comm, data, size, tag, mhandle, request);
}

static hnccl_result_t irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			       void **mhandles, void **request)
{
	return hp_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static hnccl_result_t isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request)
{
	(void)phandle;
	return hp_isend(send_comm, data, size, tag, mhandle, request);
}

static hnccl_result_t irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return hp_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

/* ---- v11, v12: a context per communicator ------------------------------------------------------ */

static hnccl_result_t init_v11(void **ctx, uint64_t comm_id, struct hnccl_comm_config *config,
			       hnccl_logger_fn logger, hnccl_profiler_fn profiler)
{
	return hp_init(ctx, comm_id, config, logger, profiler);
}

static hnccl_result_t set_net_attr(void *ctx, struct hnccl_net_attr *attr)
{
	return hp_set_net_attr(ctx, attr);
}

/* ---- the tables ---------------------------------------------------------------------------------- */

/* Calls every version shares, by member name. */
#define COMMON_CALLS                                                                            \
	.devices = hp_devices, .accept = hp_accept, .regMr = hp_reg_mr,                          \
	.regMrDmaBuf = hp_reg_mr_dmabuf, .deregMr = hp_dereg_mr, .iflush = hp_iflush,            \
	.test = hp_test, .closeSend = hp_close_send, .closeRecv = hp_close_recv,                 \
	.closeListen = hp_close_listen, .getDeviceMr = hp_get_device_mr,                         \
	.irecvConsumed = hp_irecv_consumed

HP_EXPORT const struct hnccl_net_v8 ncclNetPlugin_v8 = {
	.name = HP_PLUGIN_NAME,
	.init = init_v8,
	.getProperties = props_v8,
	.listen = listen_legacy,
	.connect = connect_v8,
	.isend = isend_v8,
	.irecv = irecv_v8,
	COMMON_CALLS,
};

HP_EXPORT const struct hnccl_net_v9 ncclNetPlugin_v9 = {
	.name = HP_PLUGIN_NAME,
	.init = init_v8,
	.getProperties = props_v9,
	.listen = listen_legacy,
	.connect = connect_v8,
	.isend = isend_v9,
	.irecv = irecv_v9,
	.makeVDevice = NULL, /* no NIC fusion: each interface is its own device */
	COMMON_CALLS,
};

HP_EXPORT const struct hnccl_net_v10 ncclNetPlugin_v10 = {
	.name = HP_PLUGIN_NAME,
	.init = init_v10,
	.getProperties = props_v10,
	.listen = listen_legacy,
	.connect = connect_v10,
	.isend = isend_v10,
	.irecv = irecv_v10,
	.makeVDevice = NULL,
	COMMON_CALLS,
};

HP_EXPORT const struct hnccl_net_v11 ncclNetPlugin_v11 = {
	.name = HP_PLUGIN_NAME,
	.init = init_v11,
	.getProperties = props_v11,
	.listen = hp_listen,
	.connect = hp_connect,
	.isend = isend_v10,
	.irecv = irecv_v10,
	.makeVDevice = NULL,
	.finalize = hp_finalize,
	.setNetAttr = set_net_attr,
	COMMON_CALLS,
};

HP_EXPORT const struct hnccl_net_v12 ncclNetPlugin_v12 = {
	.name = HP_PLUGIN_NAME,
	.init = init_v11,
	.getProperties = props_v12,
	.listen = hp_listen,
	.connect = hp_connect,
	.isend = isend_v10,
	.irecv = irecv_v10,
	.makeVDevice = NULL,
	.finalize = hp_finalize,
	.setNetAttr = set_net_attr,
	COMMON_CALLS,
};
