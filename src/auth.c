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
	__typeof__(&crypto_generichash) hash;
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
	LOOKUP(hash, crypto_generichash);
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
	struct auth_key ctl_tx, ctl_rx; /* the control channel's, one per direction */
	bool aes;
	uint64_t tx_count; /* frames sealed: the next one's counter */
	uint64_t ctl_tx_count; /* control messages sealed: the next one's counter */
	uint64_t ctl_rx_next;  /* one past the newest control counter taken */
	/* the replay window: one past the newest counter taken, and a bit for each of the last
	 * AUTH_REPLAY_WINDOW counters (counter % AUTH_REPLAY_WINDOW), set once taken */
	uint64_t rx_next;
	uint64_t rx_taken[AUTH_REPLAY_WINDOW / 64];
};

/* What each key is for: its label, 15 bytes with the NUL, so no two keys are the same. */
static const char label_frames[] = "harp frames v1";
static const char label_control[] = "harp control v1";
_Static_assert(sizeof(label_frames) == 15, "the frames' label is 15 bytes with its NUL");

/*
 * One direction's key, bound to the addresses its frames travel between: BLAKE2b keyed with the
 * key exchange's session key, over a label and the sender's then the receiver's address (4
 * bytes each over IPv4, 16 over IPv6).
 */
static int key_set(struct auth_key *k, const char *label, size_t label_len, const uint8_t *session,
		   const union wire_ip *from_ip, const union wire_ip *to_ip, bool aes)
{
	uint8_t in[sizeof(label_control) + 32];
	size_t n = wire_ip_is4(from_ip) ? 4 : 16;

	memcpy(in, label, label_len);
	memcpy(in + label_len, from_ip->b + 16 - n, n);
	memcpy(in + label_len + n, to_ip->b + 16 - n, n);
	if (so.hash(k->raw, sizeof(k->raw), in, label_len + 2 * n, session,
		    crypto_kx_SESSIONKEYBYTES)) {
		return -EPROTO;
	}
	if (aes) {
		so.aes_beforenm(&k->aes, k->raw);
	}
	return 0;
}

/* Both directions' keys, for the frames and for the control channel. */
static int keys_set(struct harp_auth *a, const uint8_t *tx, const uint8_t *rx,
		    const union wire_ip *local_ip, const union wire_ip *peer_ip)
{
	const size_t lf = sizeof(label_frames), lc = sizeof(label_control);
	int err;

	err = key_set(&a->tx, label_frames, lf, tx, local_ip, peer_ip, a->aes);
	if (!err) {
		err = key_set(&a->rx, label_frames, lf, rx, peer_ip, local_ip, a->aes);
	}
	if (!err) {
		err = key_set(&a->ctl_tx, label_control, lc, tx, local_ip, peer_ip, a->aes);
	}
	if (!err) {
		err = key_set(&a->ctl_rx, label_control, lc, rx, peer_ip, local_ip, a->aes);
	}
	return err;
}

struct harp_auth *auth_new(struct auth_keypair *kp, const uint8_t *peer_pk, bool connector,
			   bool aes, const union wire_ip *local_ip, const union wire_ip *peer_ip,
			   int *err)
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
	} else {
		memset(a, 0, sizeof(*a));
		a->aes = aes;
		*err = keys_set(a, tx, rx, local_ip, peer_ip);
		if (*err) {
			auth_free(a);
			a = NULL;
		}
	}
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

/* The 12-byte nonce: the frame's UDP ports as on the wire, then the counter, big-endian. */
static void nonce_of(uint8_t nonce[12], uint16_t src_port, uint16_t dst_port,
		     const uint8_t counter[8])
{
	memcpy(nonce, &src_port, 2);
	memcpy(nonce + 2, &dst_port, 2);
	memcpy(nonce + 4, counter, 8);
}

/* A trailer's counter, big-endian in its first 8 bytes. */
static void counter_put(uint8_t *trailer, uint64_t n)
{
	int i;

	for (i = 7; i >= 0; i--, n >>= 8) {
		trailer[i] = (uint8_t)n;
	}
}

static uint64_t counter_get(const uint8_t *trailer)
{
	uint64_t n = 0;
	int i;

	for (i = 0; i < 8; i++) {
		n = n << 8 | trailer[i];
	}
	return n;
}

/* The tag of len bytes of associated data (an empty plaintext), after the counter. */
static void tag_make(const struct harp_auth *a, const struct auth_key *k, const uint8_t nonce[12],
		     const uint8_t *ad, uint32_t len, uint8_t *trailer)
{
	uint8_t none[1] = { 0 }; /* the empty plaintext's place */

	if (a->aes) {
		so.aes_seal(none, trailer + 8, NULL, none, 0, ad, len, NULL, nonce, &k->aes);
	} else {
		so.chacha_seal(none, trailer + 8, NULL, none, 0, ad, len, NULL, nonce, k->raw);
	}
}

static bool tag_ok(const struct harp_auth *a, const struct auth_key *k, const uint8_t nonce[12],
		   const uint8_t *ad, uint32_t len, const uint8_t *trailer)
{
	uint8_t none[1] = { 0 };

	if (a->aes) {
		return so.aes_open(none, NULL, none, 0, trailer + 8, ad, len, nonce, &k->aes) == 0;
	}
	return so.chacha_open(none, NULL, none, 0, trailer + 8, ad, len, nonce, k->raw) == 0;
}

void auth_seal(struct harp_auth *a, uint16_t src_port, uint16_t dst_port, uint8_t *records,
	       uint32_t len)
{
	uint8_t *trailer = records + len, nonce[12];

	counter_put(trailer, a->tx_count++);
	nonce_of(nonce, src_port, dst_port, trailer);
	tag_make(a, &a->tx, nonce, records, len, trailer);
}

/* The window's word and bit for counter n. */
#define TAKEN_WORD(a, n) ((a)->rx_taken[((n) / 64) % ARRAY_SIZE((a)->rx_taken)])
#define TAKEN_BIT(n) (1ull << ((n) % 64))

/* Takes counter n once: false if it was taken, or is behind the newest AUTH_REPLAY_WINDOW. */
static bool take_counter(struct harp_auth *a, uint64_t n)
{
	if (n >= a->rx_next) {
		/* the window slides: the slots from rx_next to n held counters now out of it */
		if (n - a->rx_next >= AUTH_REPLAY_WINDOW) {
			memset(a->rx_taken, 0, sizeof(a->rx_taken));
		} else {
			for (uint64_t m = a->rx_next; m < n; m++) {
				TAKEN_WORD(a, m) &= ~TAKEN_BIT(m);
			}
		}
		a->rx_next = n + 1;
	} else if (a->rx_next - n > AUTH_REPLAY_WINDOW || (TAKEN_WORD(a, n) & TAKEN_BIT(n))) {
		return false;
	}
	TAKEN_WORD(a, n) |= TAKEN_BIT(n);
	return true;
}

enum auth_verdict auth_open(struct harp_auth *a, uint16_t src_port, uint16_t dst_port,
			    const uint8_t *records, uint32_t len, const uint8_t *trailer)
{
	uint8_t nonce[12];

	nonce_of(nonce, src_port, dst_port, trailer);
	if (!tag_ok(a, &a->rx, nonce, records, len, trailer)) {
		return AUTH_FORGED;
	}
	return take_counter(a, counter_get(trailer)) ? AUTH_OK : AUTH_REPLAYED;
}

/* The control channel's nonce: 4 zero bytes, then the counter as the trailer has it. */
static void ctl_nonce_of(uint8_t nonce[12], const uint8_t counter[8])
{
	memset(nonce, 0, 4);
	memcpy(nonce + 4, counter, 8);
}

void auth_seal_ctl(struct harp_auth *a, const uint8_t *msg, uint32_t len, uint8_t *trailer)
{
	uint8_t nonce[12];

	counter_put(trailer, a->ctl_tx_count++);
	ctl_nonce_of(nonce, trailer);
	tag_make(a, &a->ctl_tx, nonce, msg, len, trailer);
}

enum auth_verdict auth_open_ctl(struct harp_auth *a, const uint8_t *msg, uint32_t len,
				const uint8_t *trailer)
{
	uint8_t nonce[12];
	uint64_t n;

	ctl_nonce_of(nonce, trailer);
	if (!tag_ok(a, &a->ctl_rx, nonce, msg, len, trailer)) {
		return AUTH_FORGED;
	}
	n = counter_get(trailer);
	/* TCP keeps the order: a counter behind the newest taken was taken, or never will be */
	if (n < a->ctl_rx_next) {
		return AUTH_REPLAYED;
	}
	a->ctl_rx_next = n + 1;
	return AUTH_OK;
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
			   bool aes, const union wire_ip *local_ip, const union wire_ip *peer_ip,
			   int *err)
{
	(void)kp, (void)peer_pk, (void)connector, (void)aes, (void)local_ip, (void)peer_ip;
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

void auth_seal(struct harp_auth *a, uint16_t src_port, uint16_t dst_port, uint8_t *records,
	       uint32_t len)
{
	(void)a, (void)src_port, (void)dst_port, (void)records, (void)len;
}

enum auth_verdict auth_open(struct harp_auth *a, uint16_t src_port, uint16_t dst_port,
			    const uint8_t *records, uint32_t len, const uint8_t *trailer)
{
	(void)a, (void)src_port, (void)dst_port, (void)records, (void)len, (void)trailer;
	return AUTH_FORGED;
}

void auth_seal_ctl(struct harp_auth *a, const uint8_t *msg, uint32_t len, uint8_t *trailer)
{
	(void)a, (void)msg, (void)len, (void)trailer;
}

enum auth_verdict auth_open_ctl(struct harp_auth *a, const uint8_t *msg, uint32_t len,
				const uint8_t *trailer)
{
	(void)a, (void)msg, (void)len, (void)trailer;
	return AUTH_FORGED;
}

#endif
