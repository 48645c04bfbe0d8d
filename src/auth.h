/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Packet authentication (HARP_AUTH, docs/PROTOCOL.md "Authenticated frames"). At set-up each side
 * sends an X25519 public key in its hello; both derive one key per direction from the shared
 * secret and the two public keys, so an observer of the hellos learns nothing it can use. Every
 * frame of the connection then ends in a trailer: a 64-bit frame counter (the AEAD nonce; never
 * repeats under one key) and a 16-byte tag over the frame's records. The receiver checks the tag
 * before anything in the frame is applied.
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
 * The connection's keys, from this side's pair and the peer's public key; connector: the
 * side that sent the first hello. aes: both sides said AUTH_F_AES. Wipes kp's secret. NULL
 * with -errno in *err (EPROTO: the peer's key is not a valid point).
 */
struct harp_auth *auth_new(struct auth_keypair *kp, const uint8_t *peer_pk, bool connector,
			   bool aes, int *err);
void auth_free(struct harp_auth *a);
const char *auth_algorithm(const struct harp_auth *a);
/*
 * Writes the trailer after the len bytes of records at records. Called by the one thread that
 * sends the connection's frames.
 */
void auth_seal(struct harp_auth *a, uint8_t *records, uint32_t len);
/* Whether trailer (HARP_AUTH_TRAILER bytes) is the peer's tag over the len bytes at records. */
bool auth_check(const struct harp_auth *a, const uint8_t *records, uint32_t len,
		const uint8_t *trailer);

#endif
