// SPDX-License-Identifier: Apache-2.0
/* Every NCCL net plugin table version behind one API: see net_shim.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "net_shim.h"

static hnccl_logger_fn shim_logger;
static hnccl_profiler_fn shim_profiler;

const char *net_res_name(hnccl_result_t res)
{
	static const char *const names[] = {
		"ncclSuccess",	       "ncclUnhandledCudaError", "ncclSystemError",
		"ncclInternalError",   "ncclInvalidArgument",	 "ncclInvalidUsage",
		"ncclRemoteError",     "ncclInProgress",	 "ncclTimeout",
	};

	return (unsigned int)res < sizeof(names) / sizeof(names[0]) ? names[res] : "unknown";
}

/* The calls whose shape every version shares. */
#define API_COMMON(api, t)                                                                         \
	do {                                                                                       \
		(api)->name = (t)->name;                                                           \
		(api)->devices = (t)->devices;                                                     \
		(api)->accept = (t)->accept;                                                       \
		(api)->reg_mr = (t)->regMr;                                                        \
		(api)->reg_mr_dmabuf = (t)->regMrDmaBuf;                                           \
		(api)->dereg_mr = (t)->deregMr;                                                    \
		(api)->iflush = (t)->iflush;                                                       \
		(api)->test = (t)->test;                                                           \
		(api)->close_send = (t)->closeSend;                                                \
		(api)->close_recv = (t)->closeRecv;                                                \
		(api)->close_listen = (t)->closeListen;                                            \
	} while (0)

/* Members v8 to v12 share, in the same order. */
#define PROPS_HEAD(p, raw)                                                                         \
	do {                                                                                       \
		(p)->name = (raw)->name;                                                           \
		(p)->pci_path = (raw)->pciPath;                                                    \
		(p)->guid = (raw)->guid;                                                           \
		(p)->ptr_support = (raw)->ptrSupport;                                              \
		(p)->reg_is_global = (raw)->regIsGlobal;                                           \
		(p)->speed = (raw)->speed;                                                         \
		(p)->port = (raw)->port;                                                           \
		(p)->latency = (raw)->latency;                                                     \
		(p)->max_comms = (raw)->maxComms;                                                  \
		(p)->max_recvs = (raw)->maxRecvs;                                                  \
		(p)->net_device_type = (int)(raw)->netDeviceType;                                  \
		(p)->net_device_version = (raw)->netDeviceVersion;                                 \
	} while (0)

/* v9 on: forceFlush, the virtual-NIC list (only its first ndevs entries count) and limits. */
#define PROPS_V9(p, raw)                                                                           \
	do {                                                                                       \
		int i_;                                                                            \
		PROPS_HEAD(p, raw);                                                                \
		(p)->force_flush = (raw)->forceFlush;                                              \
		(p)->vndevs = (raw)->vProps.ndevs;                                                 \
		for (i_ = 0; i_ < (raw)->vProps.ndevs &&                                           \
			     i_ < (int)(sizeof((raw)->vProps.devs) / sizeof(int));                 \
		     i_++) {                                                                       \
			(p)->vdevs[i_] = (raw)->vProps.devs[i_];                                   \
		}                                                                                  \
		(p)->max_p2p_bytes = (raw)->maxP2pBytes;                                           \
		(p)->max_coll_bytes = (raw)->maxCollBytes;                                         \
	} while (0)

static void props_defaults(struct net_props *p)
{
	memset(p, 0, sizeof(*p));
	p->vndevs = 1;
	p->max_p2p_bytes = HNCCL_NET_V8_MAX_SIZE;
	p->max_coll_bytes = HNCCL_NET_V8_MAX_SIZE;
	p->max_multi_request_size = 1;
	p->rail_id = HNCCL_NET_ID_UNDEF;
	p->plane_id = HNCCL_NET_ID_UNDEF;
}

/* v8: int sizes, no context, no profiler. */
static const struct hnccl_net_v8 *t8;

static hnccl_result_t v8_init(void **ctx, uint64_t comm_id)
{
	(void)comm_id;
	*ctx = NULL;
	return t8->init(shim_logger);
}

static hnccl_result_t v8_props(int dev, struct net_props *p, int poison)
{
	struct hnccl_props_v8 raw;
	hnccl_result_t res;

	memset(&raw, poison, sizeof(raw)); /* NCCL does not clear it either */
	res = t8->getProperties(dev, &raw);
	props_defaults(p);
	p->vdevs[0] = dev;
	PROPS_HEAD(p, &raw);
	return res;
}

static hnccl_result_t v8_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	return t8->listen(dev, handle, listen_comm);
}

static hnccl_result_t v8_connect(void *ctx, int dev, void *handle, void **send_comm,
				 struct hnccl_net_device_handle **dev_handle)
{
	(void)ctx;
	return t8->connect(dev, handle, send_comm, dev_handle);
}

static hnccl_result_t v8_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			       void *phandle, void **request)
{
	(void)phandle;
	if (size > HNCCL_NET_V8_MAX_SIZE) {
		return HNCCL_INVALID_USAGE; /* NCCL refuses these itself for a v8 plugin */
	}
	return t8->isend(send_comm, data, (int)size, tag, mhandle, request);
}

static hnccl_result_t v8_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			       void **mhandles, void **phandles, void **request)
{
	int isizes[NET_SHIM_MAX_GROUP], i;

	(void)phandles;
	if (n < 1 || n > NET_SHIM_MAX_GROUP) {
		return HNCCL_INVALID_USAGE;
	}
	for (i = 0; i < n; i++) {
		if (sizes[i] > HNCCL_NET_V8_MAX_SIZE) {
			return HNCCL_INVALID_USAGE;
		}
		isizes[i] = (int)sizes[i];
	}
	/* NCCL's v8 layer clears the optional-completion preset before calling the plugin */
	*request = NULL;
	return t8->irecv(recv_comm, n, data, isizes, tags, mhandles, request);
}

/* v9: size_t sizes; init and connect as v8. */
static const struct hnccl_net_v9 *t9;

static hnccl_result_t v9_init(void **ctx, uint64_t comm_id)
{
	(void)comm_id;
	*ctx = NULL;
	return t9->init(shim_logger);
}

static hnccl_result_t v9_props(int dev, struct net_props *p, int poison)
{
	struct hnccl_props_v9 raw;
	hnccl_result_t res;

	memset(&raw, poison, sizeof(raw));
	res = t9->getProperties(dev, &raw);
	props_defaults(p);
	PROPS_V9(p, &raw);
	return res;
}

static hnccl_result_t v9_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	return t9->listen(dev, handle, listen_comm);
}

static hnccl_result_t v9_connect(void *ctx, int dev, void *handle, void **send_comm,
				 struct hnccl_net_device_handle **dev_handle)
{
	(void)ctx;
	return t9->connect(dev, handle, send_comm, dev_handle);
}

static hnccl_result_t v9_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			       void *phandle, void **request)
{
	(void)phandle;
	return t9->isend(send_comm, data, size, tag, mhandle, request);
}

static hnccl_result_t v9_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			       void **mhandles, void **phandles, void **request)
{
	(void)phandles;
	return t9->irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

/* v10: profiler in init, a comm config in connect, profiler handles in isend/irecv. */
static const struct hnccl_net_v10 *t10;

static hnccl_result_t v10_init(void **ctx, uint64_t comm_id)
{
	(void)comm_id;
	*ctx = NULL;
	return t10->init(shim_logger, shim_profiler);
}

static hnccl_result_t v10_props(int dev, struct net_props *p, int poison)
{
	struct hnccl_props_v10 raw;
	hnccl_result_t res;

	memset(&raw, poison, sizeof(raw));
	res = t10->getProperties(dev, &raw);
	props_defaults(p);
	PROPS_V9(p, &raw);
	return res;
}

static hnccl_result_t v10_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	(void)ctx;
	return t10->listen(dev, handle, listen_comm);
}

static hnccl_result_t v10_connect_config(void *ctx, int dev, void *handle, void **send_comm,
					 struct hnccl_net_device_handle **dev_handle)
{
	/* on NCCL's stack for the call only; scribbled over after it, so a plugin that keeps the
	 * pointer reads garbage */
	struct hnccl_comm_config config = { .trafficClass = HNCCL_NET_TRAFFIC_CLASS_UNDEF };
	hnccl_result_t res;

	(void)ctx;
	res = t10->connect(dev, &config, handle, send_comm, dev_handle);
	memset(&config, 0x7b, sizeof(config));
	__asm__ volatile("" : : "r"(&config) : "memory");
	return res;
}

/* v11 and v12: a context per communicator, finalize. */
static const struct hnccl_net_v11 *t11;
static const struct hnccl_net_v12 *t12;

static hnccl_result_t v11_init_with(hnccl_result_t (*init)(void **, uint64_t,
							   struct hnccl_comm_config *,
							   hnccl_logger_fn, hnccl_profiler_fn),
				    void **ctx, uint64_t comm_id)
{
	struct hnccl_comm_config config = { .trafficClass = HNCCL_NET_TRAFFIC_CLASS_UNDEF };
	hnccl_result_t res;

	*ctx = NULL;
	res = init(ctx, comm_id, &config, shim_logger, shim_profiler);
	memset(&config, 0x7b, sizeof(config)); /* "copy it, never keep the pointer" */
	__asm__ volatile("" : : "r"(&config) : "memory");
	return res;
}

static hnccl_result_t v11_init(void **ctx, uint64_t comm_id)
{
	return v11_init_with(t11->init, ctx, comm_id);
}

static hnccl_result_t v12_init(void **ctx, uint64_t comm_id)
{
	return v11_init_with(t12->init, ctx, comm_id);
}

static hnccl_result_t v11_props(int dev, struct net_props *p, int poison)
{
	struct hnccl_props_v11 raw;
	hnccl_result_t res;

	memset(&raw, poison, sizeof(raw));
	res = t11->getProperties(dev, &raw);
	props_defaults(p);
	PROPS_V9(p, &raw);
	p->max_multi_request_size = raw.maxMultiRequestSize;
	return res;
}

static hnccl_result_t v12_props(int dev, struct net_props *p, int poison)
{
	struct hnccl_props_v12 raw;
	hnccl_result_t res;

	memset(&raw, poison, sizeof(raw));
	res = t12->getProperties(dev, &raw);
	props_defaults(p);
	PROPS_V9(p, &raw);
	p->max_multi_request_size = raw.maxMultiRequestSize;
	p->rail_id = raw.railId;
	p->plane_id = raw.planeId;
	return res;
}

int net_api_load(struct net_api *api, void *lib, int version, hnccl_logger_fn logger,
		 hnccl_profiler_fn profiler, char *err, size_t errlen)
{
	char sym[32];
	const void *table;

	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
	if (version < 8 || version > 12) {
		snprintf(err, errlen, "no net plugin API version %d (8 to 12)", version);
		return -1;
	}
	table = dlsym(lib, sym);
	if (!table) {
		snprintf(err, errlen, "%s not found in the plugin: %s", sym, dlerror());
		return -1;
	}
	return net_api_bind(api, table, version, logger, profiler, err, errlen);
}

int net_api_bind(struct net_api *api, const void *table, int version, hnccl_logger_fn logger,
		 hnccl_profiler_fn profiler, char *err, size_t errlen)
{
	char sym[32];

	snprintf(sym, sizeof(sym), "the v%d table", version);
	if (version < 8 || version > 12) {
		snprintf(err, errlen, "no net plugin API version %d (8 to 12)", version);
		return -1;
	}
	shim_logger = logger;
	shim_profiler = profiler;
	memset(api, 0, sizeof(*api));
	api->version = version;
	api->table = table;
	switch (version) {
	case 8:
		t8 = table;
		API_COMMON(api, t8);
		api->init = v8_init;
		api->get_properties = v8_props;
		api->listen = v8_listen;
		api->connect = v8_connect;
		api->isend = v8_isend;
		api->irecv = v8_irecv;
		break;
	case 9:
		t9 = table;
		API_COMMON(api, t9);
		api->preset_optional_recv = true;
		api->init = v9_init;
		api->get_properties = v9_props;
		api->listen = v9_listen;
		api->connect = v9_connect;
		api->isend = v9_isend;
		api->irecv = v9_irecv;
		break;
	case 10:
		t10 = table;
		API_COMMON(api, t10);
		api->preset_optional_recv = true;
		api->init = v10_init;
		api->get_properties = v10_props;
		api->listen = v10_listen;
		api->connect = v10_connect_config;
		api->isend = t10->isend;
		api->irecv = t10->irecv;
		break;
	case 11:
		t11 = table;
		API_COMMON(api, t11);
		api->preset_optional_recv = true;
		api->init = v11_init;
		api->finalize = t11->finalize;
		api->get_properties = v11_props;
		api->listen = t11->listen;
		api->connect = t11->connect;
		api->isend = t11->isend;
		api->irecv = t11->irecv;
		api->set_net_attr = t11->setNetAttr;
		break;
	default:
		t12 = table;
		API_COMMON(api, t12);
		api->preset_optional_recv = true;
		api->init = v12_init;
		api->finalize = t12->finalize;
		api->get_properties = v12_props;
		api->listen = t12->listen;
		api->connect = t12->connect;
		api->isend = t12->isend;
		api->irecv = t12->irecv;
		api->set_net_attr = t12->setNetAttr;
		break;
	}
	if (version >= 11 && !api->finalize) {
		snprintf(err, errlen, "%s has no finalize; NCCL calls it unconditionally", sym);
		return -1;
	}
	return 0;
}
