/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libkvx: the engine library.  An inference engine (one per TP/PP rank) attaches to its local
 * kvxd over a Unix socket, registers pools (memfd-backed, passed with SCM_RIGHTS), opens rooms
 * (decode) or submits chunks (prefill), and reads room events.
 *
 * Threading: a struct kvx_conn is used by one thread at a time (the caller serialises).
 * Every call returns 0 (or a non-negative value where documented) or a negative errno; a bad
 * argument is refused locally or by kvxd and never harms another engine's rooms.
 */
#ifndef KVX_KVX_H
#define KVX_KVX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVX_NAME_MAX 64			      /* node names, including the NUL */
#define KVX_MAX_SOURCES 16		      /* sources (prefill nodes) of one room */
#define KVX_MAX_ROOM_PAGES 4096		      /* destination pages of one room */
#define KVX_ROOM_ID_MAX ((uint64_t)INT64_MAX) /* room ids are 63-bit */
#define KVX_MAX_REGIONS 4		      /* regions of one room */
#define KVX_RANK_MAX 65535u		      /* engine ranks are 0..KVX_RANK_MAX */
#define KVX_MAX_DESTS 8			      /* decode endpoints of one prefill room */

struct kvx_conn;

/* The version of the libkvx actually loaded, "MAJOR.MINOR.PATCH" (compare with
 * KVX_VERSION_STRING of <kvx/version.h>, the headers compiled against).  Any thread. */
const char *kvx_version(void);

/* Room states, as seen by engines (same values as kvxd's enum kvx_room_state). */
enum kvx_state {
	KVX_STATE_BOOTSTRAPPING = 0,
	KVX_STATE_WAITING_FOR_INPUT = 1,
	KVX_STATE_TRANSFERRING = 2,
	KVX_STATE_SUCCESS = 3,
	KVX_STATE_FAILED = 4,
	KVX_STATE_DRAINING = 5,
	KVX_STATE_RELEASED = 6,
};

const char *kvx_state_str(int state);

/* A pool: nbufs buffers of npages pages of page_size bytes each, laid out buffer-major in one
 * memfd: page p of buffer b is at offset (b * npages + p) * page_size. */
struct kvx_pool_geometry {
	uint32_t page_size; /* bytes, a multiple of 64, at most 16 MiB */
	uint32_t npages;    /* pages per buffer */
	uint32_t nbufs;	    /* buffers (e.g. one per layer for K and one for V) */
};

/* A room event: the room's state changed.
 *
 * The contract: every engine is told how every room it touched ended, exactly once.
 *  - decode: one SUCCESS (every source delivered; the pages hold the data) or one RELEASED
 *    (the room failed or was aborted, and nothing can write into its pages any more: they are
 *    the engine's again) per open.  A FAILED event before RELEASED says why; the pages are not
 *    the engine's until RELEASED.
 *  - prefill: one SUCCESS (every WRITE of the room completed: the source pages are free) or one
 *    FAILED (with error and reason; no WRITE of the room is outstanding any more once the room
 *    failed and drained) per room it submitted to, in every order of the decode side's
 *    metadata, aborts and the engine's chunks; a room that ended before the engine's first
 *    chunk (decode aborted it) is told at that chunk.
 *  - No event is sent twice.  An engine that disconnects fails its unfinished rooms at once;
 *    the other side learns it by a failure push, not a timeout. */
struct kvx_event {
	uint64_t room;
	uint32_t generation;
	int32_t state;	 /* enum kvx_state */
	int32_t error;	 /* 0, or the negative errno that explains FAILED */
	char reason[96]; /* human-readable cause of FAILED, or "" */
};

/* Connect to the kvxd listening on the Unix socket at path.  Returns NULL with errno set:
 * EDQUOT when the caller's uid already has [engine] max_sessions_per_uid sessions. */
struct kvx_conn *kvx_connect(const char *path);
void kvx_disconnect(struct kvx_conn *c);

/* Connect as rank `rank` (0..KVX_RANK_MAX) of an engine: the TP (or PP) rank of this process.
 * Rooms are keyed by (room id, rank) on a node, so every rank of an engine opens (decode) or
 * submits to (prefill) the same room id, and a decode room names its sources by node and rank.
 * kvx_connect() is rank 0.  Two engines of one rank on one node share that rank's room ids (the
 * second open of a live id is refused with -EEXIST). */
struct kvx_conn *kvx_connect_rank(const char *path, uint32_t rank);

/* Flags of kvx_connect_flags(). */
#define KVX_CONNECT_WAKE_ENDS 1u

/* kvx_connect_rank() with flags.  KVX_CONNECT_WAKE_ENDS: kvx_conn_fd() turns readable for the
 * replies to this engine's requests and for its rooms' ends (SUCCESS, FAILED, RELEASED) only.
 * The states on the way (BOOTSTRAPPING, WAITING_FOR_INPUT, TRANSFERRING, DRAINING) still come,
 * in order and before their room's end, but at the engine's next read, not when they happen:
 * one wake-up of the engine per room and side instead of one per state.  For an engine that
 * waits for its rooms' ends (a decode engine for SUCCESS or RELEASED, a prefill engine for its
 * writes' end), which is every engine that submits its chunks as they are computed (a prefill
 * room takes chunks before decode's metadata reached it); not for one that waits for
 * WAITING_FOR_INPUT before it submits.  Takes effect on kvxd's shared-memory rings (the
 * default), and is dropped quietly with a kvxd that does not know it (the engine is then woken
 * for every state, as without it).  Unknown flags: NULL with errno EINVAL. */
struct kvx_conn *kvx_connect_flags(const char *path, uint32_t rank, uint32_t flags);

/* The rank this connection declared. */
uint32_t kvx_rank(const struct kvx_conn *c);

/* The node name of the kvxd this connection talks to (valid until disconnect). */
const char *kvx_node_name(const struct kvx_conn *c);

/* Register a pool backed by memfd (kvxd maps and registers it with the NIC; the caller keeps
 * its own fd and mapping).  Returns the pool id (> 0) or -errno: -EDQUOT when the engine has
 * [engine] max_pools_per_engine pools, its uid max_pools_per_uid, or its uid would pin more
 * than max_pinned_mb_per_uid, -ENOSPC when the node's pool table is full, -E2BIG over 64 GiB,
 * -ERANGE when the memfd is smaller than the geometry, -EINVAL when the fd is not memory (a
 * memfd, MFD_HUGETLB or not, or a file of tmpfs or hugetlbfs: never a file of a disk or FUSE
 * filesystem).  kvxd answers once every page is pinned: this call waits 2 s per GiB of the
 * pool longer than the request timeout (and kvx_pool_unregister, answered once every page is
 * unpinned, as long as for the largest pool, 64 GiB). */
int kvx_pool_register(struct kvx_conn *c, int memfd, const struct kvx_pool_geometry *g);
/* Unregister a pool.  Returns 0; -EBUSY while a room or chunk still uses it (it stays
 * registered and usable; a prefill room uses the pools its chunks read until it is closed and
 * has left, a grace period later); -ENOENT for a pool this engine does not have; -EIO when the NIC
 * refused to deregister it on some rail (the pool is gone for the engine all the same and no
 * longer counts toward its max_pools_per_engine; kvxd retries the deregistration, and its
 * pinned bytes count for the uid until then); or another -errno of the connection. */
int kvx_pool_unregister(struct kvx_conn *c, int pool_id);

/* Decode: open a room whose data lands in pages[0..npages) of pool_id, delivered by the named
 * source nodes (each source writes its own chunks).  Returns the room's generation (>= 1) or
 * -errno (-EDQUOT: the engine has [engine] max_rooms_per_engine rooms, or its user
 * max_rooms_per_uid; a room counts until it is closed; -EPERM: another user's engine holds the
 * rank, see kvx_chunk_submit).  Re-opening an id whose previous room ended starts a new generation;
 * a source whose prefill engine has not closed the earlier attempt (its late chunks would go to
 * the new room) refuses it at once: the room's FAILED event says -EBUSY.
 * The same as kvx_room_open_regions() with one region, whole pages, and every source of rank 0. */
int64_t kvx_room_open(struct kvx_conn *c, uint64_t room, int pool_id, const uint32_t *pages,
		      uint32_t npages, const char *const *sources, uint32_t nsources);

/*
 * Room shapes engines need (DESIGN.md section 6).  A decode room has one or more regions: a
 * pool and that pool's pages (for example the K/V pages in one pool and an auxiliary buffer,
 * with its own item size, in another).  Each source writes, for each region, a slice of every
 * page: bytes [src_offset, src_offset + length) of its source page land at bytes
 * [dst_offset, dst_offset + length) of the destination page, in every buffer the chunk names.
 * A slice of length 0 is the whole page (source and destination pages of the same size): the
 * usual case.  Head slices move between different TP sizes: a decode rank with TP 4 takes from
 * prefill ranks 2d and 2d+1 (TP 8) their whole page into the two halves of its own page
 * (dst_offset 0 and page/2); a decode rank with TP 8 takes half of a TP 4 prefill rank's page
 * (src_offset 0 or page/2).
 */
struct kvx_slice {
	uint32_t src_offset; /* bytes into each source page */
	uint32_t dst_offset; /* bytes into each destination page */
	uint32_t length;     /* bytes; 0: the whole page, both offsets 0 */
};

struct kvx_region {
	int32_t pool_id;       /* a pool this engine registered */
	uint32_t npages;       /* >= 1; the room's regions hold at most KVX_MAX_ROOM_PAGES */
	const uint32_t *pages; /* destination pages of the pool, in the room's order */
};

struct kvx_source {
	const char *node;			 /* the source's node name */
	uint32_t rank;				 /* the prefill engine's rank on that node */
	struct kvx_slice slice[KVX_MAX_REGIONS]; /* per region; all 0: whole pages */
};

/* Decode: open a room of nregions regions (1..KVX_MAX_REGIONS) filled by nsources sources
 * (1..KVX_MAX_SOURCES, distinct (node, rank) pairs), each of which writes its chunks and ends
 * with its last one.  Returns the generation (>= 1) or -errno: -EINVAL for a bad shape (the
 * reply names it: a pool that is not this engine's, a page beyond its pool, a slice beyond a
 * page, too many pages), plus kvx_room_open()'s errors. */
int64_t kvx_room_open_regions(struct kvx_conn *c, uint64_t room, const struct kvx_region *regions,
			      uint32_t nregions, const struct kvx_source *sources,
			      uint32_t nsources);

/* One room of kvx_room_openv(): the arguments of kvx_room_open_regions(). */
struct kvx_room_req {
	uint64_t room;
	const struct kvx_region *regions;
	uint32_t nregions;
	const struct kvx_source *sources;
	uint32_t nsources;
};

/* Decode: open n rooms (1..1024) in one call.  The requests go out together, up to 64 at a time
 * (on rings, one wake-up of kvxd for them), and then their replies are collected: a batch costs
 * about one round trip to kvxd per 64 rooms, not one per room.  gen[i] is room i's result as
 * kvx_room_open_regions() would return it (its generation, or -errno for that room alone).  Returns
 * n; -EINVAL when a room fails libkvx's own checks (nothing of the batch is sent); or the session's
 * -errno
 * (-ECONNRESET, -ETIMEDOUT) part-way: gen[] holds the results that came, and that -errno for
 * the rooms that got no answer (each may or may not be open: kvx_room_close() tells). */
int kvx_room_openv(struct kvx_conn *c, const struct kvx_room_req *rooms, uint32_t n, int64_t *gen);

/* Close n rooms (1..1024) in one call, like kvx_room_openv(): status[i] is what
 * kvx_room_close() would return for rooms[i].  Returns n, -EINVAL (a room id beyond
 * KVX_ROOM_ID_MAX: nothing sent) or the session's -errno part-way, as kvx_room_openv(). */
int kvx_room_closev(struct kvx_conn *c, const uint64_t *rooms, uint32_t n, int *status);

/* Prefill: one chunk of a room (kvx_chunk_submitv).  src_pages[i] of pool_id, in buffers
 * [buf_first, buf_first + buf_count) (buf_count 0: buf_first to the pool's last buffer), is
 * written to destination page dst_offset + i of the decode room's region `region` (its own slice
 * of each page), in the same buffers.  Layer-wise transfer: one chunk per layer's buffers, as
 * soon as the layer is computed.  last marks this source's last chunk of the room: every chunk
 * submitted before it (any region, any buffers) has landed when decode sees the room's
 * delivery.
 *
 * Fan-out: ndest (1..KVX_MAX_DESTS; 0 means 1) is how many decode endpoints (decode node and
 * rank, for example the ranks of a decode engine with a larger TP, or several decode data-parallel
 * ranks) this room feeds; every chunk of the room names the same ndest.  The first ndest
 * endpoints whose metadata names this room (and this rank) are its destinations; each chunk is
 * written to each of them, with its own region pages and slices, and the room succeeds once
 * every WRITE to every destination completed.  A failure or an abort from any of them fails
 * the room for all (each is told at once, and each is acknowledged after the drain). */
struct kvx_chunk {
	uint64_t room;
	uint32_t chunk_index;
	uint32_t region;
	int32_t pool_id;
	uint32_t npages;
	const uint32_t *src_pages;
	uint32_t dst_offset;
	uint32_t buf_first;
	uint32_t buf_count;
	uint32_t ndest;
	int last;
};

/* Prefill: submit n chunks (1..1024) in one call (one wake-up of kvxd for the batch).  Returns
 * n when all were queued, or -errno: for a chunk libkvx refused locally none of the batch was
 * sent (-EINVAL); -ECONNRESET (kvxd went away) or -ETIMEDOUT (kvxd took nothing for the
 * request timeout) part-way: the chunks before it may have been queued (resubmitting them
 * rewrites the same pages; a chunk resubmitted after its room's last chunk went is refused and
 * fails the room unless it has ended: resubmit only the chunks that did not go).  A chunk
 * kvxd refuses fails its room, as for kvx_chunk_submit(). */
int kvx_chunk_submitv(struct kvx_conn *c, const struct kvx_chunk *chunks, uint32_t n);

/* Prefill: submit one chunk of a room.  src_pages[i] of pool_id (every buffer) is written to
 * the room's destination page dst_offset + i.  last marks this source's last chunk.  The call
 * is asynchronous: 0 means queued.  A chunk kvxd refuses fails its room (its other chunks, the
 * last one among them, must not make it a SUCCESS without this one's pages): the room's FAILED
 * event carries the refusal (-EDQUOT when a new room would pass max_rooms_per_engine or
 * max_rooms_per_uid, -ERANGE
 * when dst_offset + npages passes KVX_MAX_ROOM_PAGES or a page or buffer is beyond the pool,
 * -ENOENT an unknown pool, -E2BIG when the room's chunks would read more than 16 pools, -EAGAIN
 * when kvxd's polling core is full, -EALREADY for a chunk after the room's last: decode may
 * have its pages back).  A room not known yet is kept failed until it is closed.  Two refusals
 * leave the room alone: a chunk for another engine's room, or for a room of a rank another
 * user's engine holds (-EPERM: a rank is held by the user whose engine on it registered a pool
 * or took a room first, while one of its engines that hold it is connected; operators'
 * sessions may take any), and one for a room this
 * engine closed while its writes still drain (-EBUSY).  Both fail the attempt the chunk
 * belongs to, though: once that room is gone (or let go), the attempt's next chunk fails the
 * room it opens (-EBUSY), until the engine closes the room id (a close answered -EBUSY does not
 * count); then submit the attempt again, every chunk of it.  The same as one kvx_chunk of region 0
 * and every buffer. */
int kvx_chunk_submit(struct kvx_conn *c, uint64_t room, uint32_t chunk_index, int pool_id,
		     const uint32_t *src_pages, uint32_t npages, uint32_t dst_offset, int last);

/* Decode: abort a room.  kvxd arms a new generation, asks every source it notified to stop,
 * and keeps the pages held: the room goes FAILED -> DRAINING -> RELEASED, and only the RELEASED
 * event (carrying the abort generation) hands the pages back, once no source can still write
 * into them (all sources acknowledged the abort after draining, or their connections were
 * fenced).  Every decode failure (a source's failure, the waiting timeout) takes the same path.
 * Returns the abort generation, or -ENOENT (unknown room), -EALREADY (the room already
 * succeeded: nothing to abort; its pages are the engine's).  An abort can also lose the race
 * to a room's last delivery after it returned: then SUCCESS arrives instead of RELEASED, and
 * likewise nothing can still write into the pages. */
int64_t kvx_room_abort(struct kvx_conn *c, uint64_t room);

/* Drop a finished room's bookkeeping: decode SUCCESS or RELEASED, prefill SUCCESS or FAILED.
 * Returns 0, -ENOENT, or -EBUSY (a decode room still draining: wait for RELEASED). */
int kvx_room_close(struct kvx_conn *c, uint64_t room);

/* Read up to max events; waits up to timeout_ms (-1: forever, 0: poll).  Returns how many
 * (0..max) or -errno (-ECONNRESET when kvxd went away).  libkvx keeps up to 2^20 events unread
 * (they arrive while any call waits for its reply); one more ends the session rather than be
 * lost: every call then fails with -ENOBUFS, and kvxd treats the engine as gone. */
int kvx_event_read(struct kvx_conn *c, struct kvx_event *ev, int max, int timeout_ms);

/* The fd to wait on (readable when events may be ready), for an engine's own event loop. */
int kvx_conn_fd(const struct kvx_conn *c);

/* Operator command ("peers", "rooms", "counters", "fault NAME:N"); the text reply is written to
 * out (NUL-terminated, truncated to len).  Returns 0 or -errno: -EPERM for a command that
 * changes state ("fault", "peer NAME pause|resume|try") when the caller is not root, kvxd's
 * uid or a member of [engine] admin_group; "peers", "rooms", "counters" are open to all. */
int kvx_admin(struct kvx_conn *c, const char *cmd, char *out, size_t len);

/* The same with the whole reply, however long (kvxd pages it out, at most 4 MiB; up to 16 MiB is
 * taken): *out is a NUL-terminated malloc'd text the caller frees, also when the command failed (it
 * explains the error); NULL when nothing came back.  Returns 0 or -errno as kvx_admin. */
int kvx_admin_text(struct kvx_conn *c, const char *cmd, char **out);

#ifdef __cplusplus
}
#endif
#endif /* KVX_KVX_H */
