/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control messages, as bytes: the handle a listener publishes, the hellos of the set-up
 * (control.c), a running connection's 16-byte messages (chan.c) and the node agent's (agent.h).
 *
 * Each checker takes bytes received from outside, of any length, and returns a verdict with the
 * reason in why; it touches no socket, connection or context, so the fuzzers (tests/fuzz) and
 * the code that receives the messages judge them with the same code.
 */
#ifndef HARP_CTRLMSG_H
#define HARP_CTRLMSG_H

#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "harp/harp.h"
#include "wire.h"

/* ---- the handle ------------------------------------------------------------------------------ */

#define HANDLE_MAGIC 0x48415250u /* "HARP" */
#define HANDLE_VERSION 1

/* What a harp_handle holds; the rest of its 128 bytes are zero. */
struct handle_wire {
	uint32_t magic;
	uint16_t version;
	uint16_t family;   /* AF_INET or AF_INET6 (Linux's numbers), network order */
	uint32_t ipv4;	   /* AF_INET: the listener's address, network order; else 0 */
	uint16_t tcp_port; /* network order */
	uint16_t reserved;
	uint64_t nonce;	  /* names this listener */
	uint8_t ipv6[16]; /* AF_INET6: the listener's address; else 0 */
};
_Static_assert(sizeof(struct handle_wire) <= HARP_HANDLE_USED, "handle fits the bytes harp owns");
_Static_assert(HARP_HANDLE_SIZE <= 128, "NCCL_NET_HANDLE_MAXSIZE is 128 bytes");

/*
 * The listener a handle names: its TCP address (IPv4 mapped, or IPv6), in network order, and its
 * nonce. A link-local IPv6 address holds no scope: the connector takes its own interface's.
 */
struct ctrlmsg_handle {
	union wire_ip ip;
	uint16_t tcp_port;
	uint64_t nonce;
};

/* Zeroes the HARP_HANDLE_SIZE bytes at bytes and writes h into them. */
void ctrlmsg_handle_build(uint8_t bytes[HARP_HANDLE_SIZE], const struct ctrlmsg_handle *h);
/*
 * Reads the handle in the len bytes at bytes into out. Returns 0, or -EINVAL with why saying
 * what is wrong (out is then unspecified).
 */
int ctrlmsg_handle_parse(const void *bytes, size_t len, struct ctrlmsg_handle *out, char *why,
			 size_t whylen);

/* ---- the set-up's hellos --------------------------------------------------------------------- */

#define CHAN_MAGIC 0x48525043u /* "HRPC"; the set-up hellos start with it too */
/* 2: paths found by probing; 3: a frame may carry several records; 4: small sends may go
 * unsolicited; 5: X25519 keys for HARP_AUTH (96 bytes); 6: path MTU probes, packets sent again
 * in parts (wire version 3); 7: HARP_AUTH's keys bound to the addresses, its nonce to the ports,
 * and a replay window; 9: IPv6 data addresses (family, ipv6); 10: under HARP_AUTH the messages
 * after set-up carry a counter and a MAC, and a close's value no longer acks */
#define HELLO_VERSION 10
#define HELLO_MIN_MTU 576 /* what every IPv4 host must take */
#define HELLO_MIN_MTU6 1280 /* and every IPv6 link (RFC 8200) */

enum hello_type {
	HELLO_REQ = 1,
	HELLO_OK = 2,
	HELLO_REFUSE = 3,
};

/* Both directions of the handshake; integers in network order. */
struct hello {
	uint32_t magic;
	uint16_t version;
	uint16_t type;
	uint64_t nonce; /* HELLO_REQ: the listener's, from the handle */
	uint64_t token; /* chosen by the connector */
	uint32_t conn_id;
	uint32_t ipv4; /* family 4: the sender's data address; else 0 */
	uint16_t udp_port;
	uint16_t queue;	  /* HELLO_REQ: engines the connector runs; HELLO_OK: the engine chosen
			   * (an index among them, not a NIC queue number) */
	uint16_t mtu;
	uint16_t refuse_errno;
	uint16_t port_count; /* with udp_port: the sender's UDP range, where its probes may land */
	uint8_t auth;	     /* AUTH_F_*; HELLO_OK: AUTH_F_WANT says the connection runs it */
	uint8_t family;	     /* 4 or 6: the family of the sender's data address (the control
			      * connection's); HELLO_REFUSE: may be 0 */
	uint8_t ipv6[16];    /* family 6: the sender's data address; else 0 */
	uint8_t reserved[4];
	uint8_t auth_pk[AUTH_PUBKEY_BYTES]; /* with AUTH_F_KEY: an X25519 public key */
};
_Static_assert(sizeof(struct hello) == 96, "hello is 96 bytes");

/* A hello's type and refusal, in host order; the rest stays in the struct hello. */
struct ctrlmsg_hello_view {
	uint16_t type;	       /* enum hello_type; 0 until magic and version checked out */
	uint16_t refuse_errno; /* HELLO_REFUSE: the listener's errno, 0 when it gave none */
};

/*
 * Checks the hello in the len bytes at bytes: the magic, the version, the type (want, or a
 * refusal), want HELLO_REQ's nonce, and the numbers the connection will run on. Returns 0;
 * -EPROTO or -EINVAL; or, for a refusal, the listener's errno negated. A refusal counts only
 * where a connector waits for the listener's answer (want HELLO_OK) and carries the nonce, and
 * its errno only if it is one a listener sends (else -ECONNREFUSED); anywhere else it is a
 * protocol error. why says what is wrong; view says whether the peer refused.
 */
int ctrlmsg_hello_check(const void *bytes, size_t len, enum hello_type want, uint64_t nonce,
			struct ctrlmsg_hello_view *view, char *why, size_t whylen);

/* ---- a running connection's control channel (chan.h) ----------------------------------------- */

enum chan_msg_type {
	CHAN_CLOSE = 1, /* value: the sender's rcv_nxt, the bound of what it may still ack */
	CHAN_PATH = 2,	/* value: a probe candidate that reached us; reserved: its round */
	CHAN_SILENT = 3, /* value: ms we have heard nothing from the sender's data path while we
			  * waited on it (its frames do not reach us) */
	CHAN_UNHEARD = 4, /* value: ms since anything of ours reached the sender, whose timeouts
			   * found every path silent: the pairs we sent on since are dark; probe
			   * fresh ones */
};

/* Integers in network order. Under HARP_AUTH each is followed by HARP_AUTH_TRAILER bytes: a
 * counter and a MAC over the 16 (auth_seal_ctl). */
struct chan_msg {
	uint32_t magic;
	uint32_t type;
	uint32_t value;
	uint32_t reserved;
};
_Static_assert(sizeof(struct chan_msg) == 16, "control message is 16 bytes");

/* A control message, in host order. */
struct ctrlmsg_chan {
	uint32_t type; /* enum chan_msg_type */
	uint32_t value;
	uint32_t round; /* CHAN_PATH: the probe round (the reserved field) */
};

/* Checks the message in the len bytes at bytes into out. 0, or -EPROTO with why. */
int ctrlmsg_chan_check(const void *bytes, size_t len, struct ctrlmsg_chan *out, char *why,
		       size_t whylen);

/* ---- the node agent's (agent.h) -------------------------------------------------------------- */

/*
 * Whether the len bytes at bytes are a well-formed struct harp_agent_msg of this version (op in
 * range, strings terminated). 0, or -EBADMSG with why. The agent checks requests with it, the
 * client answers.
 */
int ctrlmsg_agent_check(const void *bytes, size_t len, char *why, size_t whylen);

#endif
