/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Packet authentication (HARP_AUTH, docs/PROTOCOL.md "Authenticated frames"). At set-up each side
 * sends an X25519 public key in its hello; both derive one key per direction from the shared
 * secret, the two public keys and the connection's two IP addresses, so an observer of the
 * hellos learns nothing it can use. Every frame of the connection then ends in a trailer: a
 * 64-bit frame counter (never repeats under one key) and a 16-byte tag over the frame's records.
 * The nonce is the frame's UDP ports and the counter, so a frame moved to another path fails as
 * one moved to another connection does. The receiver checks the tag before anything in the frame
 * is applied, then takes each counter once (a sliding window of AUTH_REPLAY_WINDOW frames).
 *
 * The algorithm is AES-256-GCM where both ends have AES-NI, else ChaCha20-Poly1305; both with an
 * empty plaintext (the records travel in clear and are the associated data), i.e. a MAC.
 * libsodium does the cryptography; it is loaded when the first connection wants it, so nodes
 * that do not use HARP_AUTH need not have it.
 */
#ifndef HARP_AUTH_H
#define HARP_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define AUTH_PUBKEY_BYTES 32

/* What one side says in its hello. */
#define AUTH_F_WANT 0x01 /* this side's HARP_AUTH is on */
#define AUTH_F_AES 0x02	 /* this side can run AES-256-GCM at speed */
#define AUTH_F_KEY 0x04	 /* the hello's auth_pk holds a key */

/*
 * Frames a counter may come behind the newest one taken and still be taken once. Paths reorder:
 * a frame later than this is dropped as a replay and its data sent again, so it is 4 times
 * HARP_CWND_MAX's most packets in flight, with room for the acks that share the counter.
 */
#define AUTH_REPLAY_WINDOW 8192

/* What auth_open found. */
enum auth_verdict {
	AUTH_OK,       /* the peer's, and new: apply it */
	AUTH_FORGED,   /* no trailer of the peer's over these records, ports and counter */
	AUTH_REPLAYED, /* the peer's, but its counter was taken already or is past the window */
};

struct auth_keypair {
	uint8_t pk[AUTH_PUBKEY_BYTES];
	uint8_t sk[32];
};

struct harp_auth;

/*
 * Loads libsodium, once per process. Returns 0, or -ENOENT with why holding one line naming what
 * is missing.
 */
int auth_load(char *why, size_t whylen);
/* This side's AUTH_F_AES (after a successful auth_load). */
bool auth_has_aes(void);
/* A fresh key pair for one connection's set-up. */
void auth_keypair(struct auth_keypair *kp);
/*
 * The connection's keys, from this side's pair, the peer's public key and the two addresses
 * its frames travel between (network order); connector: the side that sent the first hello.
 * aes: both sides said AUTH_F_AES. Wipes kp's secret. NULL with -errno in *err (EPROTO: the
 * peer's key is not a valid point).
 */
struct harp_auth *auth_new(struct auth_keypair *kp, const uint8_t *peer_pk, bool connector,
			   bool aes, const union wire_ip *local_ip, const union wire_ip *peer_ip,
			   int *err);
void auth_free(struct harp_auth *a);
const char *auth_algorithm(const struct harp_auth *a);
/*
 * Writes the trailer after the len bytes of records at records, for a frame that leaves from
 * UDP port src_port to dst_port (network order, as on the wire). Called by the one thread that
 * sends the connection's frames.
 */
void auth_seal(struct harp_auth *a, uint16_t src_port, uint16_t dst_port, uint8_t *records,
	       uint32_t len);
/*
 * Judges a frame that came from src_port to dst_port (as on the wire) with len bytes of records
 * and trailer (HARP_AUTH_TRAILER bytes) after them; on AUTH_OK its counter is taken. The MAC is
 * checked first, so a forgery never moves the window. Called by the one thread that receives
 * the connection's frames.
 */
enum auth_verdict auth_open(struct harp_auth *a, uint16_t src_port, uint16_t dst_port,
			    const uint8_t *records, uint32_t len, const uint8_t *trailer);

/*
 * The control channel's messages after set-up (chan.c) carry the same trailer, made with keys of
 * their own (another label) and a nonce of 4 zero bytes and the counter, over the len bytes of
 * the message as associated data. auth_seal_ctl writes HARP_AUTH_TRAILER bytes at trailer;
 * auth_open_ctl takes a counter only if it is past every one taken before (TCP keeps the order,
 * and a message the socket had no room for leaves a gap). Called by the connection's engine.
 */
void auth_seal_ctl(struct harp_auth *a, const uint8_t *msg, uint32_t len, uint8_t *trailer);
enum auth_verdict auth_open_ctl(struct harp_auth *a, const uint8_t *msg, uint32_t len,
				const uint8_t *trailer);

#endif
