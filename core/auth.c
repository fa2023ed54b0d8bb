/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer authentication: secret files and HMAC-SHA256 over the handshake transcript (see
 * auth.h).
 */
#include "core/auth.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define TRANSCRIPT_MAX (32 + 2 + 2 * 4 + 2 * (2 + KVX_CFG_NAME_MAX) + 3 * 8)

static int
secret_read(const char *path, uint8_t *key, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	ssize_t n;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (st.st_uid != geteuid()) {
		rc = -EPERM;
		snprintf(err, errlen, "%s: owned by uid %u, not by kvxd's uid %u", path,
			 (unsigned)st.st_uid, (unsigned)geteuid());
		goto out;
	}
	if ((st.st_mode & 07777) != 0600 && (st.st_mode & 07777) != 0400) {
		rc = -EPERM;
		snprintf(err, errlen, "%s: mode %04o, want 0600 or 0400 (a shared secret)", path,
			 (unsigned)(st.st_mode & 07777));
		goto out;
	}
	/* read one byte more than allowed to tell "too long" */
	while (got <= KVX_AUTH_KEY_MAX + 2) {
		n = read(fd, key + got, KVX_AUTH_KEY_MAX + 2 - got + 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		got += (size_t)n;
		if (got > KVX_AUTH_KEY_MAX + 2)
			break;
	}
	while (got > 0 && (key[got - 1] == '\n' || key[got - 1] == '\r'))
		got--;
	if (got < KVX_AUTH_KEY_MIN || got > KVX_AUTH_KEY_MAX) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: the secret must be %d..%d bytes, this one is %s%zu",
			 path, KVX_AUTH_KEY_MIN, KVX_AUTH_KEY_MAX,
			 got > KVX_AUTH_KEY_MAX ? "over " : "", got);
		goto out;
	}
	*len = got;
out:
	close(fd);
	return rc;
}

int
kvx_auth_keys_load(struct kvx_auth_keys *k, const struct kvx_config *cfg, char *err, size_t errlen)
{
	/* the buffer holds one byte more than a key may, plus a newline */
	static uint8_t buf[KVX_AUTH_KEY_MAX + 3];
	const char *paths[2] = {cfg->secret_file, cfg->secret_next_file};
	int rc;

	memset(k, 0, sizeof(*k));
	if (cfg->auth == KVX_AUTH_NONE) {
		k->none = true;
		return 0;
	}
	if (cfg->secret_file[0] == '\0') {
		snprintf(err, errlen,
			 "[security] secret_file: required: peers authenticate with a shared "
			 "secret (or set \"auth = none\" to run this node unauthenticated)");
		return -EINVAL;
	}
	for (int i = 0; i < 2 && paths[i][0]; i++) {
		size_t len = 0;

		rc = secret_read(paths[i], buf, &len, err, errlen);
		if (rc) {
			OPENSSL_cleanse(buf, sizeof(buf));
			kvx_auth_keys_clear(k);
			return rc;
		}
		memcpy(k->key[i], buf, len);
		k->len[i] = len;
		k->n = i + 1;
	}
	OPENSSL_cleanse(buf, sizeof(buf));
	return 0;
}

void
kvx_auth_keys_clear(struct kvx_auth_keys *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}

static size_t
put_name(uint8_t *b, size_t off, const char *name)
{
	size_t n = strnlen(name, KVX_CFG_NAME_MAX - 1);
	uint16_t le = htole16((uint16_t)n);

	memcpy(b + off, &le, 2);
	memcpy(b + off + 2, name, n);
	return off + 2 + n;
}

static size_t
encode(uint8_t *b, enum kvx_auth_role role, const struct kvx_auth_transcript *t)
{
	const char *label = role == KVX_AUTH_ACCEPTOR ? "kvx-auth-acceptor" : "kvx-auth-initiator";
	uint16_t v = htole16(t->version);
	uint32_t f[2] = {htole32(t->features_i), htole32(t->features_a)};
	uint64_t q[3] = {htole64(t->nonce_i), htole64(t->nonce_a), htole64(t->session)};
	size_t off = strlen(label) + 1; /* with its NUL: labels are not prefixes of data */

	memcpy(b, label, off);
	memcpy(b + off, &v, 2);
	memcpy(b + off + 2, f, sizeof(f));
	off = put_name(b, off + 2 + sizeof(f), t->name_i);
	off = put_name(b, off, t->name_a);
	memcpy(b + off, q, sizeof(q));
	return off + sizeof(q);
}

static int
mac_with(const uint8_t *key, size_t keylen, enum kvx_auth_role role,
	 const struct kvx_auth_transcript *t, uint8_t mac[KVX_AUTH_MAC_LEN])
{
	static const uint8_t empty[1];
	uint8_t b[TRANSCRIPT_MAX];
	unsigned int outlen = 0;
	size_t n = encode(b, role, t);

	if (!HMAC(EVP_sha256(), keylen ? key : empty, (int)keylen, b, n, mac, &outlen) ||
	    outlen != KVX_AUTH_MAC_LEN)
		return -EIO;
	return 0;
}

int
kvx_auth_mac(const struct kvx_auth_keys *k, enum kvx_auth_role role,
	     const struct kvx_auth_transcript *t, uint8_t mac[KVX_AUTH_MAC_LEN])
{
	if (k->none || k->n == 0)
		return mac_with(NULL, 0, role, t, mac);
	return mac_with(k->key[0], k->len[0], role, t, mac);
}

/* An entry's MAC under key (keylen 0: the empty key). */
static int
entry_mac_with(const uint8_t *key, size_t keylen, const char *ekey, const char *body,
	       uint8_t mac[KVX_AUTH_MAC_LEN])
{
	static const uint8_t empty[1];
	static const char label[] = "kvx-etcd-entry"; /* its NUL too */
	size_t kl = strlen(ekey), bl = strlen(body);
	unsigned int outlen = 0;
	uint8_t b[1024];

	if (sizeof(label) + (uint64_t)kl + 1 + bl > sizeof(b))
		return -EINVAL;
	memcpy(b, label, sizeof(label));
	memcpy(b + sizeof(label), ekey, kl + 1);
	memcpy(b + sizeof(label) + kl + 1, body, bl);
	if (!HMAC(EVP_sha256(), keylen ? key : empty, (int)keylen, b, sizeof(label) + kl + 1 + bl,
		  mac, &outlen) ||
	    outlen != KVX_AUTH_MAC_LEN)
		return -EIO;
	return 0;
}

int
kvx_auth_entry_mac(const struct kvx_auth_keys *k, const char *key, const char *body,
		   uint8_t mac[KVX_AUTH_MAC_LEN])
{
	if (k->none || k->n == 0)
		return entry_mac_with(NULL, 0, key, body, mac);
	return entry_mac_with(k->key[0], k->len[0], key, body, mac);
}

bool
kvx_auth_entry_verify(const struct kvx_auth_keys *k, const char *key, const char *body,
		      const uint8_t mac[KVX_AUTH_MAC_LEN])
{
	uint8_t want[KVX_AUTH_MAC_LEN];
	bool ok = false;

	if (k->none || k->n == 0) {
		ok = entry_mac_with(NULL, 0, key, body, want) == 0 &&
		     CRYPTO_memcmp(want, mac, KVX_AUTH_MAC_LEN) == 0;
	} else {
		for (int i = 0; i < k->n; i++)
			if (entry_mac_with(k->key[i], k->len[i], key, body, want) == 0 &&
			    CRYPTO_memcmp(want, mac, KVX_AUTH_MAC_LEN) == 0)
				ok = true; /* no early exit: the same work for every key */
	}
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}

bool
kvx_auth_verify(const struct kvx_auth_keys *k, enum kvx_auth_role role,
		const struct kvx_auth_transcript *t, const uint8_t mac[KVX_AUTH_MAC_LEN])
{
	uint8_t want[KVX_AUTH_MAC_LEN];
	bool ok = false;

	if (k->none || k->n == 0) {
		ok = mac_with(NULL, 0, role, t, want) == 0 &&
		     CRYPTO_memcmp(want, mac, KVX_AUTH_MAC_LEN) == 0;
	} else {
		for (int i = 0; i < k->n; i++)
			if (mac_with(k->key[i], k->len[i], role, t, want) == 0 &&
			    CRYPTO_memcmp(want, mac, KVX_AUTH_MAC_LEN) == 0)
				ok = true; /* no early exit: the same work for every key */
	}
	OPENSSL_cleanse(want, sizeof(want));
	return ok;
}
