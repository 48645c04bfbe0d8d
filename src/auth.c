// SPDX-License-Identifier: Apache-2.0
/*
 * HARP_AUTH's cryptography (auth.h), on libsodium loaded with dlopen: the library and the plugin
 * link nothing for it. The functions are looked up by name and typed from sodium.h, so a
 * mismatch with the header is a compile error, not a crash.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "internal.h"

#ifdef HARP_HAVE_SODIUM
#include <sodium.h>

/* Debian 12's soname first; a development symlink where only that exists. */
static const char *const sodium_names[] = { "libsodium.so.23", "libsodium.so" };

static struct {
	void *lib;
	bool aes;
	int err;
	char why[160];
	__typeof__(&sodium_init) init;
	__typeof__(&sodium_memzero) memzero;
	__typeof__(&crypto_kx_keypair) kx_keypair;
	__typeof__(&crypto_kx_client_session_keys) kx_client;
	__typeof__(&crypto_kx_server_session_keys) kx_server;
	__typeof__(&crypto_aead_aes256gcm_is_available) aes_available;
	__typeof__(&crypto_aead_aes256gcm_beforenm) aes_beforenm;
	__typeof__(&crypto_aead_aes256gcm_encrypt_detached_afternm) aes_seal;
	__typeof__(&crypto_aead_aes256gcm_decrypt_detached_afternm) aes_open;
	__typeof__(&crypto_aead_chacha20poly1305_ietf_encrypt_detached) chacha_seal;
	__typeof__(&crypto_aead_chacha20poly1305_ietf_decrypt_detached) chacha_open;
} so;
static pthread_once_t so_once = PTHREAD_ONCE_INIT;

static void so_load(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(sodium_names) && !so.lib; i++) {
		so.lib = dlopen(sodium_names[i], RTLD_NOW | RTLD_LOCAL);
	}
	if (!so.lib) {
		snprintf(so.why, sizeof(so.why),
			 "HARP_AUTH needs libsodium (%s, Debian's libsodium23), which could not be "
			 "loaded: %s",
			 sodium_names[0], dlerror());
		so.err = -ENOENT;
		return;
	}
#define LOOKUP(field, name)                                                                        \
	do {                                                                                       \
		*(void **)&so.field = dlsym(so.lib, #name);                                        \
		if (!so.field) {                                                                   \
			snprintf(so.why, sizeof(so.why), "HARP_AUTH: libsodium lacks %s", #name);  \
			so.err = -ENOENT;                                                          \
			return;                                                                    \
		}                                                                                  \
	} while (0)
	LOOKUP(init, sodium_init);
	LOOKUP(memzero, sodium_memzero);
	LOOKUP(kx_keypair, crypto_kx_keypair);
	LOOKUP(kx_client, crypto_kx_client_session_keys);
	LOOKUP(kx_server, crypto_kx_server_session_keys);
	LOOKUP(aes_available, crypto_aead_aes256gcm_is_available);
	LOOKUP(aes_beforenm, crypto_aead_aes256gcm_beforenm);
	LOOKUP(aes_seal, crypto_aead_aes256gcm_encrypt_detached_afternm);
	LOOKUP(aes_open, crypto_aead_aes256gcm_decrypt_detached_afternm);
	LOOKUP(chacha_seal, crypto_aead_chacha20poly1305_ietf_encrypt_detached);
	LOOKUP(chacha_open, crypto_aead_chacha20poly1305_ietf_decrypt_detached);
#undef LOOKUP
	if (so.init() < 0) {
		snprintf(so.why, sizeof(so.why), "HARP_AUTH: libsodium failed to initialise");
		so.err = -ENOENT;
		return;
	}
	so.aes = so.aes_available() == 1;
}

int auth_load(char *why, size_t whylen)
{
	pthread_once(&so_once, so_load);
	if (so.err) {
		snprintf(why, whylen, "%s", so.why);
	}
	return so.err;
}

bool auth_has_aes(void)
{
	return so.aes;
}

void auth_keypair(struct auth_keypair *kp)
{
	so.kx_keypair(kp->pk, kp->sk);
}

/* One direction's key: AES's expanded state, or ChaCha's key as it is. */
struct auth_key {
	crypto_aead_aes256gcm_state aes; /* 16-byte aligned by its type */
	uint8_t raw[crypto_kx_SESSIONKEYBYTES];
};

struct harp_auth {
	struct auth_key tx, rx;
	bool aes;
	uint64_t tx_count; /* frames sealed: the next one's counter */
};

static void key_set(struct auth_key *k, const uint8_t *raw, bool aes)
{
	memcpy(k->raw, raw, sizeof(k->raw));
	if (aes) {
		so.aes_beforenm(&k->aes, raw);
	}
}

struct harp_auth *auth_new(struct auth_keypair *kp, const uint8_t *peer_pk, bool connector,
			   bool aes, int *err)
{
	uint8_t rx[crypto_kx_SESSIONKEYBYTES], tx[crypto_kx_SESSIONKEYBYTES];
	struct harp_auth *a;
	int rc;

	rc = connector ? so.kx_client(rx, tx, kp->pk, kp->sk, peer_pk)
		       : so.kx_server(rx, tx, kp->pk, kp->sk, peer_pk);
	so.memzero(kp->sk, sizeof(kp->sk));
	if (rc) {
		*err = -EPROTO;
		return NULL;
	}
	a = aligned_alloc(64, (sizeof(*a) + 63) & ~(size_t)63);
	if (!a) {
		*err = -ENOMEM;
		return NULL;
	}
	memset(a, 0, sizeof(*a));
	a->aes = aes;
	key_set(&a->tx, tx, aes);
	key_set(&a->rx, rx, aes);
	so.memzero(rx, sizeof(rx));
	so.memzero(tx, sizeof(tx));
	return a;
}

void auth_free(struct harp_auth *a)
{
	if (a) {
		so.memzero(a, sizeof(*a));
		free(a);
	}
}

const char *auth_algorithm(const struct harp_auth *a)
{
	return a->aes ? "AES-256-GCM" : "ChaCha20-Poly1305";
}

/* The 12-byte nonce: the frame counter, big-endian, after four zero bytes. */
static void nonce_of(uint8_t nonce[12], const uint8_t counter[8])
{
	memset(nonce, 0, 4);
	memcpy(nonce + 4, counter, 8);
}

void auth_seal(struct harp_auth *a, uint8_t *records, uint32_t len)
{
	uint8_t *trailer = records + len, nonce[12], none[1] = { 0 };
	uint64_t n = a->tx_count++;
	int i;

	for (i = 7; i >= 0; i--, n >>= 8) {
		trailer[i] = (uint8_t)n;
	}
	nonce_of(nonce, trailer);
	if (a->aes) {
		so.aes_seal(none, trailer + 8, NULL, none, 0, records, len, NULL, nonce, &a->tx.aes);
	} else {
		so.chacha_seal(none, trailer + 8, NULL, none, 0, records, len, NULL, nonce,
			       a->tx.raw);
	}
}

bool auth_check(const struct harp_auth *a, const uint8_t *records, uint32_t len,
		const uint8_t *trailer)
{
	uint8_t nonce[12], none[1] = { 0 }; /* the empty plaintext's place */

	nonce_of(nonce, trailer);
	if (a->aes) {
		return so.aes_open(none, NULL, none, 0, trailer + 8, records, len, nonce,
				   &a->rx.aes) == 0;
	}
	return so.chacha_open(none, NULL, none, 0, trailer + 8, records, len, nonce,
			      a->rx.raw) == 0;
}

#else /* built without libsodium's header */

int auth_load(char *why, size_t whylen)
{
	snprintf(why, whylen, "HARP_AUTH: this harp was built without libsodium (install "
			      "libsodium-dev and build again)");
	return -ENOENT;
}

bool auth_has_aes(void)
{
	return false;
}

void auth_keypair(struct auth_keypair *kp)
{
	memset(kp, 0, sizeof(*kp));
}

struct harp_auth *auth_new(struct auth_keypair *kp, const uint8_t *peer_pk, bool connector,
			   bool aes, int *err)
{
	(void)kp, (void)peer_pk, (void)connector, (void)aes;
	*err = -ENOENT;
	return NULL;
}

void auth_free(struct harp_auth *a)
{
	(void)a;
}

const char *auth_algorithm(const struct harp_auth *a)
{
	(void)a;
	return "none";
}

void auth_seal(struct harp_auth *a, uint8_t *records, uint32_t len)
{
	(void)a, (void)records, (void)len;
}

bool auth_check(const struct harp_auth *a, const uint8_t *records, uint32_t len,
		const uint8_t *trailer)
{
	(void)a, (void)records, (void)len, (void)trailer;
	return false;
}

#endif
