/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/auth.c: the handshake MACs.  Each side's MAC verifies under the shared key only; any
 * change to the transcript (either nonce, either name, the session, the version, either
 * side's features) or the role breaks it; a rotation's next key is accepted; auth = none
 * verifies only MACs made with the empty key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/auth.h"

static void
keys(struct kvx_auth_keys *k, uint8_t cur, int next)
{
	memset(k, 0, sizeof(*k));
	k->n = 1;
	k->len[0] = 32;
	memset(k->key[0], cur, 32);
	if (next >= 0) {
		k->n = 2;
		k->len[1] = 24;
		memset(k->key[1], next, 24);
	}
}

static struct kvx_auth_transcript
transcript(void)
{
	return (struct kvx_auth_transcript){.version = 2,
					    .features_i = 0,
					    .features_a = 0,
					    .name_i = "decode",
					    .name_a = "prefill",
					    .nonce_i = 0x1111222233334444ull,
					    .nonce_a = 0x5555666677778888ull,
					    .session = 7};
}

static void
test_mac_verifies_under_the_key_only(void **state)
{
	struct kvx_auth_keys k1, k2;
	struct kvx_auth_transcript t = transcript();
	uint8_t mac[KVX_AUTH_MAC_LEN];

	(void)state;
	keys(&k1, 0x11, -1);
	keys(&k2, 0x22, -1);
	assert_int_equal(kvx_auth_mac(&k1, KVX_AUTH_INITIATOR, &t, mac), 0);
	assert_true(kvx_auth_verify(&k1, KVX_AUTH_INITIATOR, &t, mac));
	assert_false(kvx_auth_verify(&k2, KVX_AUTH_INITIATOR, &t, mac));
	/* a reflected MAC: the initiator's is not the acceptor's */
	assert_false(kvx_auth_verify(&k1, KVX_AUTH_ACCEPTOR, &t, mac));
	mac[31] ^= 1;
	assert_false(kvx_auth_verify(&k1, KVX_AUTH_INITIATOR, &t, mac));
}

static void
test_every_transcript_field_counts(void **state)
{
	struct kvx_auth_keys k;
	struct kvx_auth_transcript t = transcript(), u;
	uint8_t mac[KVX_AUTH_MAC_LEN];

	(void)state;
	keys(&k, 0x33, -1);
	assert_int_equal(kvx_auth_mac(&k, KVX_AUTH_ACCEPTOR, &t, mac), 0);
	for (int f = 0; f < 8; f++) {
		u = t;
		switch (f) {
		case 0:
			u.version++;
			break;
		case 1:
			u.features_i ^= KVX_AUTH_FEAT_NONE;
			break;
		case 2:
			u.features_a ^= KVX_AUTH_FEAT_NONE;
			break;
		case 3:
			u.name_i = "decode2";
			break;
		case 4:
			u.name_a = "prefil";
			break;
		case 5:
			u.nonce_i++; /* a replayed HELLO meets a fresh acceptor nonce, and so on */
			break;
		case 6:
			u.nonce_a ^= 1ull << 63;
			break;
		case 7:
			u.session++;
			break;
		}
		if (kvx_auth_verify(&k, KVX_AUTH_ACCEPTOR, &u, mac))
			fail_msg("field %d changed and the MAC still verifies", f);
	}
	/* names are length-prefixed: moving a byte from one name to the other changes it */
	u = t;
	u.name_i = "decodep";
	u.name_a = "refill";
	assert_false(kvx_auth_verify(&k, KVX_AUTH_ACCEPTOR, &u, mac));
}

static void
test_rotation_accepts_next_key(void **state)
{
	struct kvx_auth_keys old_only, old_next_new, new_next_old, new_only;
	struct kvx_auth_transcript t = transcript();
	uint8_t mac_old[KVX_AUTH_MAC_LEN], mac_new[KVX_AUTH_MAC_LEN];

	(void)state;
	keys(&old_only, 0x44, -1);
	keys(&old_next_new, 0x44, 0x55);
	/* the new key is old_next_new's second one: 24 bytes of 0x55 */
	keys(&new_next_old, 0x55, -1);
	new_next_old.len[0] = 24;
	new_next_old.n = 2;
	new_next_old.len[1] = 32;
	memset(new_next_old.key[1], 0x44, 32);
	keys(&new_only, 0x55, -1);
	new_only.len[0] = 24;
	assert_int_equal(kvx_auth_mac(&old_next_new, KVX_AUTH_INITIATOR, &t, mac_old), 0);
	assert_int_equal(kvx_auth_mac(&new_next_old, KVX_AUTH_INITIATOR, &t, mac_new), 0);
	/* a node signs with its current key */
	assert_true(kvx_auth_verify(&old_only, KVX_AUTH_INITIATOR, &t, mac_old));
	assert_false(kvx_auth_verify(&old_only, KVX_AUTH_INITIATOR, &t, mac_new));
	/* and accepts either of its keys */
	assert_true(kvx_auth_verify(&old_next_new, KVX_AUTH_INITIATOR, &t, mac_new));
	assert_true(kvx_auth_verify(&new_next_old, KVX_AUTH_INITIATOR, &t, mac_old));
	assert_true(kvx_auth_verify(&new_only, KVX_AUTH_INITIATOR, &t, mac_new));
	assert_false(kvx_auth_verify(&new_only, KVX_AUTH_INITIATOR, &t, mac_old));
}

static void
test_none_is_the_empty_key(void **state)
{
	struct kvx_auth_keys none = {.none = true}, k;
	struct kvx_auth_transcript t = transcript();
	uint8_t mac[KVX_AUTH_MAC_LEN], mac_k[KVX_AUTH_MAC_LEN];

	(void)state;
	keys(&k, 0x66, -1);
	assert_int_equal(kvx_auth_mac(&none, KVX_AUTH_ACCEPTOR, &t, mac), 0);
	assert_int_equal(kvx_auth_mac(&k, KVX_AUTH_ACCEPTOR, &t, mac_k), 0);
	assert_true(kvx_auth_verify(&none, KVX_AUTH_ACCEPTOR, &t, mac));
	assert_false(kvx_auth_verify(&k, KVX_AUTH_ACCEPTOR, &t, mac)); /* keyed node refuses */
	assert_false(kvx_auth_verify(&none, KVX_AUTH_ACCEPTOR, &t, mac_k));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mac_verifies_under_the_key_only),
		cmocka_unit_test(test_every_transcript_field_counts),
		cmocka_unit_test(test_rotation_accepts_next_key),
		cmocka_unit_test(test_none_is_the_empty_key),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
