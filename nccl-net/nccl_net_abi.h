/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The binary interface between NCCL and a network plugin, versions 8 to 12, written down by harp.
 *
 * NCCL finds a plugin by dlsym()ing a table of function pointers named ncclNetPlugin_v<N>, newest
 * first, and calls through it. Everything here must match what NCCL was compiled with, byte for
 * byte: member order, member types and every parameter list. The names carry an hnccl_/HNCCL_
 * prefix so that this header and NCCL's own can be included in one translation unit (tests do).
 * Member names follow NCCL's, so that its documentation reads across; the comments are ours.
 *
 * Layouts were read from NCCL's sources (tags v2.24.3-1 to v2.30.7-1) and are checked below on
 * LP64 targets with _Static_assert. If a check fails, the compiler or its flags disagree with
 * the ABI NCCL was built with; do not "fix" the number.
 *
 * How the versions differ, oldest first:
 *   v8   sizes in isend/irecv are int. NCCL refuses any message over 1 GiB for this table.
 *   v9   isend/irecv take size_t sizes (iflush and test still use int); properties gain
 *        forceFlush, a virtual-NIC list and maxP2pBytes/maxCollBytes; the table gains makeVDevice.
 *   v10  init gains a profiler callback; connect gains a comm config (traffic class) as its
 *        second parameter; isend/irecv gain profiler handle(s) before the request. Properties and
 *        virtual-NIC list are unchanged from v9.
 *   v11  init runs once per communicator and returns a context; it takes the comm id and the comm
 *        config (which leaves connect). listen and connect take the context first. Properties gain
 *        maxMultiRequestSize. The table gains finalize and setNetAttr.
 *   v12  the table has v11's shape. The virtual-NIC list grows from 4 to 8 entries (so every later
 *        member of the properties moves) and the properties gain railId and planeId.
 *
 * Nothing here allocates or owns memory: every pointer in these structs is owned by whoever
 * filled it in, as each member's comment says.
 */
#ifndef HARP_NCCL_NET_ABI_H
#define HARP_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#define HNCCL_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define HNCCL_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* ------------------------------------------------------------------------------------------------
 * Shared by every version
 */

/*
 * What every plugin call returns. A plugin returns only the first seven; NCCL's core uses the last
 * two for its own state (HNCCL_TIMEOUT exists only from NCCL 2.30).
 */
typedef enum hnccl_result {
	HNCCL_SUCCESS = 0,
	HNCCL_UNHANDLED_CUDA_ERROR = 1,
	HNCCL_SYSTEM_ERROR = 2,
	HNCCL_INTERNAL_ERROR = 3,
	HNCCL_INVALID_ARGUMENT = 4,
	HNCCL_INVALID_USAGE = 5,
	HNCCL_REMOTE_ERROR = 6,
	HNCCL_IN_PROGRESS = 7,
	HNCCL_TIMEOUT = 8,
} hnccl_result_t;

/* Bytes NCCL reserves for a listen handle; it ships the whole buffer to the peer. */
#define HNCCL_NET_HANDLE_MAXSIZE 128

/* Lets a plugin check at compile time that its handle type fits NCCL's buffer. */
#define HNCCL_HANDLE_FITS(type) (sizeof(type) <= HNCCL_NET_HANDLE_MAXSIZE)

/* Bits of ptrSupport, and the type argument of regMr/regMrDmaBuf: which memory a device reaches. */
#define HNCCL_PTR_HOST	 0x1
#define HNCCL_PTR_CUDA	 0x2
#define HNCCL_PTR_DMABUF 0x4

/*
 * From v9, NCCL may store this value in *request before irecv when it does not need to learn
 * that the receive completed. The plugin must still overwrite *request with a real request (or
 * NULL for "retry"). NCCL's own v8 shim clears the value before calling a v8 plugin.
 */
#define HNCCL_NET_OPTIONAL_RECV_COMPLETION 0x1

/*
 * Requests NCCL may keep outstanding on one comm for each receive of a group: a plugin sizes its
 * request pool as HNCCL_NET_MAX_REQUESTS * maxRecvs.
 */
#define HNCCL_NET_MAX_REQUESTS 32

/* NCCL's ceiling for maxP2pBytes and maxCollBytes (1 TiB); larger values fail connection set-up. */
#define HNCCL_MAX_NET_SIZE_BYTES (1ULL << 40)

/* The message size limit NCCL applies to a v8 plugin (1 GiB), and assumes for its properties. */
#define HNCCL_NET_V8_MAX_SIZE (1ULL << 30)

/* Severity passed to the logger. */
enum hnccl_log_level {
	HNCCL_LOG_NONE = 0,
	HNCCL_LOG_VERSION = 1,
	HNCCL_LOG_WARN = 2,
	HNCCL_LOG_INFO = 3,
	HNCCL_LOG_ABORT = 4,
	HNCCL_LOG_TRACE = 5,
};

/*
 * Subsystem bits for the logger's flags argument; NCCL_DEBUG_SUBSYS filters on them. DESTROY
 * appeared in NCCL 2.30.3 and ALLOC_HOST in 2.30.7; an older NCCL just sees an unknown bit.
 */
#define HNCCL_INIT	 0x1UL
#define HNCCL_COLL	 0x2UL
#define HNCCL_P2P	 0x4UL
#define HNCCL_SHM	 0x8UL
#define HNCCL_NET	 0x10UL
#define HNCCL_GRAPH	 0x20UL
#define HNCCL_TUNING	 0x40UL
#define HNCCL_ENV	 0x80UL
#define HNCCL_ALLOC	 0x100UL
#define HNCCL_CALL	 0x200UL
#define HNCCL_PROXY	 0x400UL
#define HNCCL_NVLS	 0x800UL
#define HNCCL_BOOTSTRAP	 0x1000UL
#define HNCCL_REG	 0x2000UL
#define HNCCL_PROFILE	 0x4000UL
#define HNCCL_RAS	 0x8000UL
#define HNCCL_DESTROY	 0x10000UL
#define HNCCL_ALLOC_HOST 0x20000UL
#define HNCCL_ALL	 (~0UL)

/*
 * NCCL's logger, handed to init. file and line name the caller's source position; fmt is a
 * printf format. The function stays valid until NCCL unloads the plugin.
 */
typedef void (*hnccl_logger_fn)(enum hnccl_log_level level, unsigned long flags, const char *file,
				int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Values for the profiler callback's type argument. */
#define HNCCL_PROFILER_NET_EVENT_START		 0
#define HNCCL_PROFILER_NET_EVENT_STOP		 1
#define HNCCL_PROFILER_NET_EVENT_UPDATE		 2
#define HNCCL_PROFILER_NET_EVENT_UPDATE_AND_STOP 3

/*
 * NCCL's profiler hook, handed to init from v10 (treat NULL as "no profiler"). event_handle is
 * in/out (the event being started, stopped or updated); phandle is the handle NCCL passed with
 * the isend or irecv; plugin_id and ext_data describe plugin-defined event data.
 */
typedef hnccl_result_t (*hnccl_profiler_fn)(void **event_handle, int type, void *phandle,
					    int64_t plugin_id, void *ext_data);

/* Kind of device offload a connection uses. A host-only plugin reports HNCCL_NET_DEVICE_HOST. */
enum hnccl_net_device_type {
	HNCCL_NET_DEVICE_HOST = 0,
	HNCCL_NET_DEVICE_UNPACK = 1,
	HNCCL_NET_DEVICE_GIN_PROXY = 2, /* the GIN values: NCCL 2.28 and later */
	HNCCL_NET_DEVICE_GIN_GDAKI = 3,
	HNCCL_NET_DEVICE_GIN_GPI = 4, /* NCCL 2.30.7 and later */
};

/* netDeviceVersion for a host device. */
#define HNCCL_NET_DEVICE_INVALID_VERSION 0x0

/*
 * Description of a device-offloaded comm, returned through connect/accept's last argument. It
 * has this shape in every version here (v7 to v12). NCCL passes a pointer to a NULL pointer; a
 * host-only plugin leaves it NULL.
 */
struct hnccl_net_device_handle {
	enum hnccl_net_device_type netDeviceType;
	int netDeviceVersion;
	void *handle;		/* owned by the plugin */
	size_t size;		/* bytes at handle */
	int needsProxyProgress; /* non-zero: the offload still needs NCCL's proxy thread to drive it
				 */
};

/* ------------------------------------------------------------------------------------------------
 * Structs used by more than one version. Where NCCL gives each version its own name for an
 * identical struct, we keep one struct and name the versions that use it.
 */

/* Entries in a virtual NIC's device list: 4 in v9 to v11, 8 from v12. */
#define HNCCL_NET_MAX_DEVS_PER_NIC_V9  4
#define HNCCL_NET_MAX_DEVS_PER_NIC_V12 8

/* A virtual NIC made of physical devices (v9, v10, v11). */
struct hnccl_vdevice_props_v9 {
	int ndevs;
	int devs[HNCCL_NET_MAX_DEVS_PER_NIC_V9];
};

/* A virtual NIC made of physical devices (v12). */
struct hnccl_vdevice_props_v12 {
	int ndevs;
	int devs[HNCCL_NET_MAX_DEVS_PER_NIC_V12];
};

/* "No traffic class requested", in trafficClass. */
#define HNCCL_NET_TRAFFIC_CLASS_UNDEF (-1)

/*
 * Per-communicator settings: connect's second argument in v10, init's third from v11. It lives
 * in NCCL's memory for the call only; copy what you need.
 */
struct hnccl_comm_config {
	int trafficClass; /* plugin-defined meaning, or HNCCL_NET_TRAFFIC_CLASS_UNDEF */
};

/* "No hint", in every member of the setNetAttr structs (op/algo/proto hold it cast to uint32_t). */
#define HNCCL_NET_ATTR_UNDEF (-1)

/* Hints about the traffic one side of a comm will see (v11, v12). */
struct hnccl_comm_attr {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
};

/* setNetAttr's argument (v11, v12): hints for the collective about to run. Purely advisory. */
struct hnccl_net_attr {
	struct hnccl_comm_attr sendCommAttr;
	struct hnccl_comm_attr recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
};

/* ------------------------------------------------------------------------------------------------
 * Properties: getProperties fills one of these for a device. NCCL does not clear it first, so
 * every member must be written. name and pciPath are owned by the plugin and must stay valid
 * until the plugin is unloaded.
 */

struct hnccl_props_v8 {
	char *name;
	/* The device's directory under /sys (its PCI function); NULL for a virtual interface. */
	char *pciPath;
	/* Devices reporting one guid share one port to the fabric; NCCL uses the port once. */
	uint64_t guid;
	int ptrSupport; /* HNCCL_PTR_* bits */
	/* Non-zero: regMr on a buffer inside an earlier registration (made on any comm) is cheap,
	 * as the plugin keeps a registration cache. */
	int regIsGlobal;
	int speed; /* Mbit/s */
	int port;
	float latency; /* microseconds */
	int maxComms;
	int maxRecvs; /* buffers one grouped irecv may carry */
	enum hnccl_net_device_type netDeviceType;
	int netDeviceVersion;
};

/* hnccl_props_v10 has the same layout; NCCL names them apart, and so do we. */
struct hnccl_props_v9 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush; /* non-zero: NCCL calls iflush after every receive into GPU memory */
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	enum hnccl_net_device_type netDeviceType;
	int netDeviceVersion;
	struct hnccl_vdevice_props_v9 vProps; /* a physical device lists itself: {1, {dev}} */
	size_t maxP2pBytes;		      /* in (0, HNCCL_MAX_NET_SIZE_BYTES] */
	size_t maxCollBytes;
};

struct hnccl_props_v10 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	enum hnccl_net_device_type netDeviceType;
	int netDeviceVersion;
	struct hnccl_vdevice_props_v9 vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
};

struct hnccl_props_v11 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	enum hnccl_net_device_type netDeviceType;
	int netDeviceVersion;
	struct hnccl_vdevice_props_v9 vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize; /* requests one multi-request may hold; 1 when unsupported */
};

/* "Unknown", in railId and planeId. */
#define HNCCL_NET_ID_UNDEF (-1)

struct hnccl_props_v12 {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed;
	int port;
	float latency;
	int maxComms;
	int maxRecvs;
	enum hnccl_net_device_type netDeviceType;
	int netDeviceVersion;
	struct hnccl_vdevice_props_v12 vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize;
	int16_t railId;	 /* or HNCCL_NET_ID_UNDEF */
	int16_t planeId; /* or HNCCL_NET_ID_UNDEF */
};

/* ------------------------------------------------------------------------------------------------
 * Function tables. The plugin exports one of these as a global named by HNCCL_NET_PLUGIN_SYMBOL_V*.
 *
 * Calls common to all versions, in words:
 *   listen       writes up to HNCCL_NET_HANDLE_MAXSIZE bytes into handle and creates a listen comm.
 *   connect      must not block: success with *send_comm == NULL means "call again". NCCL hands
 *                the same handle buffer to each retry.
 *   accept       likewise, with *recv_comm.
 *   regMr        registers [data, data + size) of memory type (HNCCL_PTR_*) on a comm.
 *   regMrDmaBuf  the same for a dma-buf fd at offset; may be NULL without HNCCL_PTR_DMABUF.
 *   isend/irecv  *request == NULL on success means "call again". irecv posts n buffers at once
 *                (grouped receive), matched to sends by tag; its sizes are capacities.
 *   iflush       makes received GPU data visible to the GPU; *request == NULL: nothing to do.
 *   test         *done becomes non-zero when finished; sizes (may be NULL) gets the bytes moved,
 *                one int per buffer of a grouped receive. NCCL forgets a request once test has
 *                reported it done, so the plugin reclaims it then.
 *   getDeviceMr, irecvConsumed  device offload only; a host plugin may leave them NULL.
 */

#define HNCCL_NET_PLUGIN_SYMBOL_V8  "ncclNetPlugin_v8"
#define HNCCL_NET_PLUGIN_SYMBOL_V9  "ncclNetPlugin_v9"
#define HNCCL_NET_PLUGIN_SYMBOL_V10 "ncclNetPlugin_v10"
#define HNCCL_NET_PLUGIN_SYMBOL_V11 "ncclNetPlugin_v11"
#define HNCCL_NET_PLUGIN_SYMBOL_V12 "ncclNetPlugin_v12"

struct hnccl_net_v8 {
	const char *name;
	hnccl_result_t (*init)(hnccl_logger_fn logger);
	hnccl_result_t (*devices)(int *ndev);
	hnccl_result_t (*getProperties)(int dev, struct hnccl_props_v8 *props);
	hnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	hnccl_result_t (*connect)(int dev, void *handle, void **send_comm,
				  struct hnccl_net_device_handle **send_dev_comm);
	hnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct hnccl_net_device_handle **recv_dev_comm);
	hnccl_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	hnccl_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	hnccl_result_t (*deregMr)(void *comm, void *mhandle);
	hnccl_result_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle,
				void **request);
	hnccl_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
	hnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	hnccl_result_t (*test)(void *request, int *done, int *sizes);
	hnccl_result_t (*closeSend)(void *send_comm);
	hnccl_result_t (*closeRecv)(void *recv_comm);
	hnccl_result_t (*closeListen)(void *listen_comm);
	hnccl_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	hnccl_result_t (*irecvConsumed)(void *recv_comm, int n, void *request);
};

/* v9: size_t sizes in isend/irecv, and makeVDevice. */
struct hnccl_net_v9 {
	const char *name;
	hnccl_result_t (*init)(hnccl_logger_fn logger);
	hnccl_result_t (*devices)(int *ndev);
	hnccl_result_t (*getProperties)(int dev, struct hnccl_props_v9 *props);
	hnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	hnccl_result_t (*connect)(int dev, void *handle, void **send_comm,
				  struct hnccl_net_device_handle **send_dev_comm);
	hnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct hnccl_net_device_handle **recv_dev_comm);
	hnccl_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	hnccl_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	hnccl_result_t (*deregMr)(void *comm, void *mhandle);
	hnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void **request);
	hnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **request);
	hnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	hnccl_result_t (*test)(void *request, int *done, int *sizes);
	hnccl_result_t (*closeSend)(void *send_comm);
	hnccl_result_t (*closeRecv)(void *recv_comm);
	hnccl_result_t (*closeListen)(void *listen_comm);
	hnccl_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	hnccl_result_t (*irecvConsumed)(void *recv_comm, int n, void *request);
	/* Creates a virtual NIC from props->devs and returns its index in *d; may be NULL. */
	hnccl_result_t (*makeVDevice)(int *d, struct hnccl_vdevice_props_v9 *props);
};

/* v10: profiler in init, comm config in connect, profiler handles in isend/irecv. */
struct hnccl_net_v10 {
	const char *name;
	hnccl_result_t (*init)(hnccl_logger_fn logger, hnccl_profiler_fn profiler);
	hnccl_result_t (*devices)(int *ndev);
	hnccl_result_t (*getProperties)(int dev, struct hnccl_props_v10 *props);
	hnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	hnccl_result_t (*connect)(int dev, struct hnccl_comm_config *config, void *handle,
				  void **send_comm, struct hnccl_net_device_handle **send_dev_comm);
	hnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct hnccl_net_device_handle **recv_dev_comm);
	hnccl_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	hnccl_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	hnccl_result_t (*deregMr)(void *comm, void *mhandle);
	/* phandle/phandles: profiler parents for events this request raises (one per buffer). */
	hnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	hnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	hnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	hnccl_result_t (*test)(void *request, int *done, int *sizes);
	hnccl_result_t (*closeSend)(void *send_comm);
	hnccl_result_t (*closeRecv)(void *recv_comm);
	hnccl_result_t (*closeListen)(void *listen_comm);
	hnccl_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	hnccl_result_t (*irecvConsumed)(void *recv_comm, int n, void *request);
	hnccl_result_t (*makeVDevice)(int *d, struct hnccl_vdevice_props_v9 *props);
};

/* v11: per-communicator init/finalize with a context; setNetAttr. */
struct hnccl_net_v11 {
	const char *name;
	/* Called once per communicator; *ctx is then passed to listen, connect, setNetAttr and
	 * finalize. config is valid only during the call. */
	hnccl_result_t (*init)(void **ctx, uint64_t comm_id, struct hnccl_comm_config *config,
			       hnccl_logger_fn logger, hnccl_profiler_fn profiler);
	hnccl_result_t (*devices)(int *ndev);
	hnccl_result_t (*getProperties)(int dev, struct hnccl_props_v11 *props);
	hnccl_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
	hnccl_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
				  struct hnccl_net_device_handle **send_dev_comm);
	hnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct hnccl_net_device_handle **recv_dev_comm);
	hnccl_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	hnccl_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	hnccl_result_t (*deregMr)(void *comm, void *mhandle);
	hnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	hnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	hnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	hnccl_result_t (*test)(void *request, int *done, int *sizes);
	hnccl_result_t (*closeSend)(void *send_comm);
	hnccl_result_t (*closeRecv)(void *recv_comm);
	hnccl_result_t (*closeListen)(void *listen_comm);
	hnccl_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	hnccl_result_t (*irecvConsumed)(void *recv_comm, int n, void *request);
	hnccl_result_t (*makeVDevice)(int *d, struct hnccl_vdevice_props_v9 *props);
	/* Ends what init began for one communicator. Must not be NULL. */
	hnccl_result_t (*finalize)(void *ctx);
	/* Optional (may be NULL); NCCL ignores what it returns. */
	hnccl_result_t (*setNetAttr)(void *ctx, struct hnccl_net_attr *net_attr);
};

/* v12: v11's calls; only the properties and the virtual-NIC list differ. */
struct hnccl_net_v12 {
	const char *name;
	hnccl_result_t (*init)(void **ctx, uint64_t comm_id, struct hnccl_comm_config *config,
			       hnccl_logger_fn logger, hnccl_profiler_fn profiler);
	hnccl_result_t (*devices)(int *ndev);
	hnccl_result_t (*getProperties)(int dev, struct hnccl_props_v12 *props);
	hnccl_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
	hnccl_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
				  struct hnccl_net_device_handle **send_dev_comm);
	hnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct hnccl_net_device_handle **recv_dev_comm);
	hnccl_result_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	hnccl_result_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type,
				      uint64_t offset, int fd, void **mhandle);
	hnccl_result_t (*deregMr)(void *comm, void *mhandle);
	hnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	hnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	hnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	hnccl_result_t (*test)(void *request, int *done, int *sizes);
	hnccl_result_t (*closeSend)(void *send_comm);
	hnccl_result_t (*closeRecv)(void *recv_comm);
	hnccl_result_t (*closeListen)(void *listen_comm);
	hnccl_result_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	hnccl_result_t (*irecvConsumed)(void *recv_comm, int n, void *request);
	hnccl_result_t (*makeVDevice)(int *d, struct hnccl_vdevice_props_v12 *props);
	hnccl_result_t (*finalize)(void *ctx);
	hnccl_result_t (*setNetAttr)(void *ctx, struct hnccl_net_attr *net_attr);
};

/* ------------------------------------------------------------------------------------------------
 * Layout checks. The numbers were worked out by hand from the rules of the LP64 ABIs (x86-64
 * System V and AArch64 agree for these types) and match NCCL's own structs.
 */

HNCCL_STATIC_ASSERT(HNCCL_NET_HANDLE_MAXSIZE == 128, "NCCL's handle buffer is 128 bytes");

#if defined(__LP64__) && (defined(__x86_64__) || defined(__aarch64__))

#define HNCCL_CHECK_SIZE(type, bytes) HNCCL_STATIC_ASSERT(sizeof(type) == (bytes), #type " size")
#define HNCCL_CHECK_OFF(type, member, off)                                                         \
	HNCCL_STATIC_ASSERT(offsetof(type, member) == (off), #type "." #member " offset")

/* An enum member or argument must be passed as a 4-byte int, as NCCL's are. */
HNCCL_CHECK_SIZE(hnccl_result_t, 4);
HNCCL_CHECK_SIZE(enum hnccl_log_level, 4);
HNCCL_CHECK_SIZE(enum hnccl_net_device_type, 4);

HNCCL_CHECK_SIZE(struct hnccl_net_device_handle, 32);
HNCCL_CHECK_OFF(struct hnccl_net_device_handle, netDeviceType, 0);
HNCCL_CHECK_OFF(struct hnccl_net_device_handle, netDeviceVersion, 4);
HNCCL_CHECK_OFF(struct hnccl_net_device_handle, handle, 8);
HNCCL_CHECK_OFF(struct hnccl_net_device_handle, size, 16);
HNCCL_CHECK_OFF(struct hnccl_net_device_handle, needsProxyProgress, 24);

HNCCL_CHECK_SIZE(struct hnccl_vdevice_props_v9, 20);
HNCCL_CHECK_OFF(struct hnccl_vdevice_props_v9, ndevs, 0);
HNCCL_CHECK_OFF(struct hnccl_vdevice_props_v9, devs, 4);
HNCCL_CHECK_SIZE(struct hnccl_vdevice_props_v12, 36);
HNCCL_CHECK_OFF(struct hnccl_vdevice_props_v12, ndevs, 0);
HNCCL_CHECK_OFF(struct hnccl_vdevice_props_v12, devs, 4);

HNCCL_CHECK_SIZE(struct hnccl_comm_config, 4);
HNCCL_CHECK_OFF(struct hnccl_comm_config, trafficClass, 0);

HNCCL_CHECK_SIZE(struct hnccl_comm_attr, 16);
HNCCL_CHECK_OFF(struct hnccl_comm_attr, maxConcurrentPeers, 0);
HNCCL_CHECK_OFF(struct hnccl_comm_attr, minConcurrentPeers, 4);
HNCCL_CHECK_OFF(struct hnccl_comm_attr, maxFlowsPerPeer, 8);
HNCCL_CHECK_OFF(struct hnccl_comm_attr, minFlowsPerPeer, 12);
HNCCL_CHECK_SIZE(struct hnccl_net_attr, 44);
HNCCL_CHECK_OFF(struct hnccl_net_attr, sendCommAttr, 0);
HNCCL_CHECK_OFF(struct hnccl_net_attr, recvCommAttr, 16);
HNCCL_CHECK_OFF(struct hnccl_net_attr, op, 32);
HNCCL_CHECK_OFF(struct hnccl_net_attr, algo, 36);
HNCCL_CHECK_OFF(struct hnccl_net_attr, proto, 40);

/* v8 properties: no forceFlush, so everything after regIsGlobal sits 4 bytes lower than in v9. */
HNCCL_CHECK_SIZE(struct hnccl_props_v8, 64);
HNCCL_CHECK_OFF(struct hnccl_props_v8, name, 0);
HNCCL_CHECK_OFF(struct hnccl_props_v8, pciPath, 8);
HNCCL_CHECK_OFF(struct hnccl_props_v8, guid, 16);
HNCCL_CHECK_OFF(struct hnccl_props_v8, ptrSupport, 24);
HNCCL_CHECK_OFF(struct hnccl_props_v8, regIsGlobal, 28);
HNCCL_CHECK_OFF(struct hnccl_props_v8, speed, 32);
HNCCL_CHECK_OFF(struct hnccl_props_v8, port, 36);
HNCCL_CHECK_OFF(struct hnccl_props_v8, latency, 40);
HNCCL_CHECK_OFF(struct hnccl_props_v8, maxComms, 44);
HNCCL_CHECK_OFF(struct hnccl_props_v8, maxRecvs, 48);
HNCCL_CHECK_OFF(struct hnccl_props_v8, netDeviceType, 52);
HNCCL_CHECK_OFF(struct hnccl_props_v8, netDeviceVersion, 56);

/* v9 to v12 share every offset up to vProps. */
#define HNCCL_CHECK_PROPS_HEAD(type)                                                               \
	HNCCL_CHECK_OFF(type, name, 0);                                                            \
	HNCCL_CHECK_OFF(type, pciPath, 8);                                                         \
	HNCCL_CHECK_OFF(type, guid, 16);                                                           \
	HNCCL_CHECK_OFF(type, ptrSupport, 24);                                                     \
	HNCCL_CHECK_OFF(type, regIsGlobal, 28);                                                    \
	HNCCL_CHECK_OFF(type, forceFlush, 32);                                                     \
	HNCCL_CHECK_OFF(type, speed, 36);                                                          \
	HNCCL_CHECK_OFF(type, port, 40);                                                           \
	HNCCL_CHECK_OFF(type, latency, 44);                                                        \
	HNCCL_CHECK_OFF(type, maxComms, 48);                                                       \
	HNCCL_CHECK_OFF(type, maxRecvs, 52);                                                       \
	HNCCL_CHECK_OFF(type, netDeviceType, 56);                                                  \
	HNCCL_CHECK_OFF(type, netDeviceVersion, 60);                                               \
	HNCCL_CHECK_OFF(type, vProps, 64)

HNCCL_CHECK_PROPS_HEAD(struct hnccl_props_v9);
HNCCL_CHECK_OFF(struct hnccl_props_v9, maxP2pBytes, 88);
HNCCL_CHECK_OFF(struct hnccl_props_v9, maxCollBytes, 96);
HNCCL_CHECK_SIZE(struct hnccl_props_v9, 104);

HNCCL_CHECK_PROPS_HEAD(struct hnccl_props_v10);
HNCCL_CHECK_OFF(struct hnccl_props_v10, maxP2pBytes, 88);
HNCCL_CHECK_OFF(struct hnccl_props_v10, maxCollBytes, 96);
HNCCL_CHECK_SIZE(struct hnccl_props_v10, 104);

HNCCL_CHECK_PROPS_HEAD(struct hnccl_props_v11);
HNCCL_CHECK_OFF(struct hnccl_props_v11, maxP2pBytes, 88);
HNCCL_CHECK_OFF(struct hnccl_props_v11, maxCollBytes, 96);
HNCCL_CHECK_OFF(struct hnccl_props_v11, maxMultiRequestSize, 104);
HNCCL_CHECK_SIZE(struct hnccl_props_v11, 112);

/* v12's longer device list (36 bytes) pushes the sizes to 104 and leaves no tail padding. */
HNCCL_CHECK_PROPS_HEAD(struct hnccl_props_v12);
HNCCL_CHECK_OFF(struct hnccl_props_v12, maxP2pBytes, 104);
HNCCL_CHECK_OFF(struct hnccl_props_v12, maxCollBytes, 112);
HNCCL_CHECK_OFF(struct hnccl_props_v12, maxMultiRequestSize, 120);
HNCCL_CHECK_OFF(struct hnccl_props_v12, railId, 124);
HNCCL_CHECK_OFF(struct hnccl_props_v12, planeId, 126);
HNCCL_CHECK_SIZE(struct hnccl_props_v12, 128);

/* Every table is the same list of 8-byte pointers, each version appending to the last. */
#define HNCCL_CHECK_TABLE_HEAD(type)                                                               \
	HNCCL_CHECK_OFF(type, name, 0);                                                            \
	HNCCL_CHECK_OFF(type, init, 8);                                                            \
	HNCCL_CHECK_OFF(type, devices, 16);                                                        \
	HNCCL_CHECK_OFF(type, getProperties, 24);                                                  \
	HNCCL_CHECK_OFF(type, listen, 32);                                                         \
	HNCCL_CHECK_OFF(type, connect, 40);                                                        \
	HNCCL_CHECK_OFF(type, accept, 48);                                                         \
	HNCCL_CHECK_OFF(type, regMr, 56);                                                          \
	HNCCL_CHECK_OFF(type, regMrDmaBuf, 64);                                                    \
	HNCCL_CHECK_OFF(type, deregMr, 72);                                                        \
	HNCCL_CHECK_OFF(type, isend, 80);                                                          \
	HNCCL_CHECK_OFF(type, irecv, 88);                                                          \
	HNCCL_CHECK_OFF(type, iflush, 96);                                                         \
	HNCCL_CHECK_OFF(type, test, 104);                                                          \
	HNCCL_CHECK_OFF(type, closeSend, 112);                                                     \
	HNCCL_CHECK_OFF(type, closeRecv, 120);                                                     \
	HNCCL_CHECK_OFF(type, closeListen, 128);                                                   \
	HNCCL_CHECK_OFF(type, getDeviceMr, 136);                                                   \
	HNCCL_CHECK_OFF(type, irecvConsumed, 144)

HNCCL_CHECK_TABLE_HEAD(struct hnccl_net_v8);
HNCCL_CHECK_SIZE(struct hnccl_net_v8, 152);

HNCCL_CHECK_TABLE_HEAD(struct hnccl_net_v9);
HNCCL_CHECK_OFF(struct hnccl_net_v9, makeVDevice, 152);
HNCCL_CHECK_SIZE(struct hnccl_net_v9, 160);

HNCCL_CHECK_TABLE_HEAD(struct hnccl_net_v10);
HNCCL_CHECK_OFF(struct hnccl_net_v10, makeVDevice, 152);
HNCCL_CHECK_SIZE(struct hnccl_net_v10, 160);

HNCCL_CHECK_TABLE_HEAD(struct hnccl_net_v11);
HNCCL_CHECK_OFF(struct hnccl_net_v11, makeVDevice, 152);
HNCCL_CHECK_OFF(struct hnccl_net_v11, finalize, 160);
HNCCL_CHECK_OFF(struct hnccl_net_v11, setNetAttr, 168);
HNCCL_CHECK_SIZE(struct hnccl_net_v11, 176);

HNCCL_CHECK_TABLE_HEAD(struct hnccl_net_v12);
HNCCL_CHECK_OFF(struct hnccl_net_v12, makeVDevice, 152);
HNCCL_CHECK_OFF(struct hnccl_net_v12, finalize, 160);
HNCCL_CHECK_OFF(struct hnccl_net_v12, setNetAttr, 168);
HNCCL_CHECK_SIZE(struct hnccl_net_v12, 176);

#undef HNCCL_CHECK_PROPS_HEAD
#undef HNCCL_CHECK_TABLE_HEAD
#undef HNCCL_CHECK_OFF
#undef HNCCL_CHECK_SIZE

#endif /* LP64 layout checks */

#ifdef __cplusplus
}
#endif

#endif /* HARP_NCCL_NET_ABI_H */
