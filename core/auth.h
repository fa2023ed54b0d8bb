/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer authentication (DESIGN.md section 3): a mutual challenge and response with
 * HMAC-SHA256 (OpenSSL's libcrypto) over a transcript of the handshake, compared in constant
 * time.
 *
 *   initiator -> HELLO      {version, features, name_i, nonce_i, session}
 *   acceptor  -> HELLO_ACK  {version, features, name_a, nonce_a, session,
 *                            mac_a = HMAC(K, "kvx-auth-acceptor" | transcript)}
 *   initiator -> AUTH       {mac_i = HMAC(K, "kvx-auth-initiator" | transcript)}
 *
 * transcript = u16 version | u32 features_i | u32 features_a | name_i | name_a | u64 nonce_i |
 * u64 nonce_a | u64 session (names length-prefixed).  Both nonces are fresh random 64-bit values,
 * so a captured HELLO, HELLO_ACK or AUTH replayed into another handshake fails; the role label
 * keeps one side's MAC from being reflected as the other's.  The acceptor changes nothing
 * about a peer's session before AUTH verified; the initiator sends AUTH (and creates QPs)
 * only after mac_a verified.
 *
 * Keys: the current secret and, during a rotation, the next one; a MAC made with either is
 * accepted, a node signs with its current secret.  With [security] auth = none both ends use
 * the empty key and say so in their features (KVX_AUTH_FEAT_NONE): the exchange runs the same
 * way but proves nothing, and a node that authenticates refuses such a peer by name.
 */
#ifndef KVX_CORE_AUTH_H
#define KVX_CORE_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"

#define KVX_AUTH_MAC_LEN 32
#define KVX_AUTH_KEY_MIN 16
#define KVX_AUTH_KEY_MAX 4096
#define KVX_AUTH_FEAT_NONE 0x1u /* HELLO features: this node runs unauthenticated */

enum kvx_auth_role {
	KVX_AUTH_ACCEPTOR = 0, /* mac_a, in HELLO_ACK */
	KVX_AUTH_INITIATOR,    /* mac_i, in AUTH */
};

struct kvx_auth_keys {
	bool none; /* auth = none: the empty key, KVX_AUTH_FEAT_NONE */
	int n;	   /* 1 (current) or 2 (current, next); 0 when none */
	uint8_t key[2][KVX_AUTH_KEY_MAX];
	size_t len[2];
};

/* What both MACs cover. */
struct kvx_auth_transcript {
	uint16_t version;
	uint32_t features_i, features_a;
	const char *name_i, *name_a;
	uint64_t nonce_i, nonce_a;
	uint64_t session;
};

/* Load the secrets cfg names.  A secret file must be a regular file owned by this process's
 * effective uid with mode 0600 or 0400 and hold KVX_AUTH_KEY_MIN..KVX_AUTH_KEY_MAX bytes
 * (trailing newlines are not part of the secret).  auth = hmac-sha256 without secret_file is
 * refused.  Returns 0, or -EINVAL / -EPERM / -errno with "path: message" in err.  Thread:
 * any; blocks on file I/O (start-up only). */
int kvx_auth_keys_load(struct kvx_auth_keys *k, const struct kvx_config *cfg, char *err,
		       size_t errlen);

/* Wipe the keys. */
void kvx_auth_keys_clear(struct kvx_auth_keys *k);

/* The MAC this node sends for role (made with its current key, or the empty key when none).
 * Returns 0 or -EIO (libcrypto failed).  Thread: any; never blocks. */
int kvx_auth_mac(const struct kvx_auth_keys *k, enum kvx_auth_role role,
		 const struct kvx_auth_transcript *t, uint8_t mac[KVX_AUTH_MAC_LEN]);

/* Whether mac is role's MAC over t under one of the keys (constant-time comparison).
 * Thread: any; never blocks. */
bool kvx_auth_verify(const struct kvx_auth_keys *k, enum kvx_auth_role role,
		     const struct kvx_auth_transcript *t, const uint8_t mac[KVX_AUTH_MAC_LEN]);

/* A membership entry's MAC (control/etcd.c): HMAC-SHA256 over "kvx-etcd-entry", NUL, the key,
 * NUL and the value's body, made with the current key (the empty key when none).  Returns 0
 * or -EIO.  Thread: any; never blocks. */
int kvx_auth_entry_mac(const struct kvx_auth_keys *k, const char *key, const char *body,
		       uint8_t mac[KVX_AUTH_MAC_LEN]);

/* Whether mac is an entry's MAC under one of the keys (constant-time comparison). */
bool kvx_auth_entry_verify(const struct kvx_auth_keys *k, const char *key, const char *body,
			   const uint8_t mac[KVX_AUTH_MAC_LEN]);

#endif /* KVX_CORE_AUTH_H */
