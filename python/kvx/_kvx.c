/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvx._kvx: the CPython binding of libkvx (include/kvx/kvx.h).  The Pythonic layer is
 * python/kvx/__init__.py; this file only checks arguments, converts them and calls libkvx.
 *
 * Threads: libkvx wants one thread at a time per struct kvx_conn.  Each Conn object holds a
 * lock taken around every libkvx call on it, so a second Python thread waits (with the GIL
 * released) instead of racing.  Every call that can wait (connect, a request that is a round
 * trip to kvxd, a chunk submission that may wait for room in the ring, an event read with a
 * timeout) runs with the GIL released.
 *
 * Errors: libkvx's -errno becomes kvx.Error (a subclass of OSError: .errno, .strerror), whose
 * strerror also names the call.  A bad argument is refused here, before libkvx sees it, with
 * TypeError (wrong type) or ValueError (out of range), so libkvx's own -EINVAL means kvxd or
 * libkvx disagreed with something this file let through.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include "kvx/kvx.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define PAGE_SIZE_MAX (16u << 20) /* kvx.h: struct kvx_pool_geometry */
#define ADMIN_OUT_MAX (64u << 10) /* the engine protocol's largest datagram */

static PyObject *kvx_error; /* kvx.Error */

/* Raise kvx.Error(e, "<strerror> (<what>)") for a libkvx return value -e. */
static PyObject *
raise_errno(int neg, const char *what, const char *detail)
{
	int e = neg < 0 ? -neg : neg;
	PyObject *msg, *exc;

	if (detail && *detail)
		msg = PyUnicode_FromFormat("%s (%s: %s)", strerror(e), what, detail);
	else
		msg = PyUnicode_FromFormat("%s (%s)", strerror(e), what);
	if (!msg)
		return NULL;
	exc = PyObject_CallFunction(kvx_error, "iO", e, msg);
	Py_DECREF(msg);
	if (exc) {
		PyErr_SetObject(kvx_error, exc);
		Py_DECREF(exc);
	}
	return NULL;
}

/* ---- argument conversion ---- */

/* An int in [lo, hi] (as int64 bounds; hi may be up to INT64_MAX). */
static int
get_i64(PyObject *o, const char *name, int64_t lo, int64_t hi, int64_t *out)
{
	PyObject *idx;
	long long v;
	int overflow;

	if (PyBool_Check(o) || !PyIndex_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", name,
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	idx = PyNumber_Index(o);
	if (!idx)
		return -1;
	v = PyLong_AsLongLongAndOverflow(idx, &overflow);
	Py_DECREF(idx);
	if (v == -1 && PyErr_Occurred())
		return -1;
	if (overflow || v < lo || v > hi) {
		PyErr_Format(PyExc_ValueError, "%s out of range %lld..%lld", name, (long long)lo,
			     (long long)hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int
get_u32(PyObject *o, const char *name, uint32_t lo, uint32_t *out)
{
	int64_t v;

	if (get_i64(o, name, lo, UINT32_MAX, &v) < 0)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int
get_room(PyObject *o, uint64_t *out)
{
	int64_t v;

	if (get_i64(o, "room", 0, (int64_t)KVX_ROOM_ID_MAX, &v) < 0)
		return -1;
	*out = (uint64_t)v;
	return 0;
}

static int
get_pool_id(PyObject *o, int *out)
{
	int64_t v;

	if (get_i64(o, "pool_id", 1, INT_MAX, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

/* Page indices: a 1-D C-contiguous buffer of uint32 (array.array('I'), numpy.uint32) or a
 * sequence of ints, 1..KVX_MAX_ROOM_PAGES of them, each in 0..2^32-1. */
struct pages {
	Py_buffer view; /* held while view.obj */
	uint32_t *copy; /* PyMem, when converted from a sequence */
	const uint32_t *p;
	uint32_t n;
};

static bool
format_is_u32(const char *f)
{
	if (!f)
		return false;
	if (*f == '@' || *f == '=' || *f == '<')
		f++;
	if (!strcmp(f, "I"))
		return true;
	/* 'L' is a 4-byte unsigned long only where long is 32 bits; the itemsize check decides */
	return !strcmp(f, "L") && sizeof(unsigned long) == 4;
}

static int
pages_get(PyObject *o, const char *name, struct pages *pg)
{
	PyObject *seq;
	Py_ssize_t n, i;

	memset(pg, 0, sizeof(*pg));
	if (PyObject_CheckBuffer(o)) {
		if (PyObject_GetBuffer(o, &pg->view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
			return -1;
		if (pg->view.ndim != 1 || pg->view.itemsize != 4 ||
		    !format_is_u32(pg->view.format)) {
			PyErr_Format(
				PyExc_TypeError,
				"%s: a buffer must be 1-D uint32 (format 'I'), not format '%s' "
				"itemsize %zd",
				name, pg->view.format ? pg->view.format : "B", pg->view.itemsize);
			goto err_release;
		}
		n = pg->view.len / 4;
		if (n < 1 || n > KVX_MAX_ROOM_PAGES) {
			PyErr_Format(PyExc_ValueError, "%s: %zd pages, must be 1..%d", name, n,
				     KVX_MAX_ROOM_PAGES);
			goto err_release;
		}
		pg->p = pg->view.buf;
		pg->n = (uint32_t)n;
		return 0;
	}
	if (PyUnicode_Check(o) || !PySequence_Check(o)) {
		PyErr_Format(PyExc_TypeError,
			     "%s must be a sequence of ints or a uint32 buffer, not %.100s", name,
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	seq = PySequence_Fast(o, name);
	if (!seq)
		return -1;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n < 1 || n > KVX_MAX_ROOM_PAGES) {
		PyErr_Format(PyExc_ValueError, "%s: %zd pages, must be 1..%d", name, n,
			     KVX_MAX_ROOM_PAGES);
		goto err_seq;
	}
	pg->copy = PyMem_New(uint32_t, (size_t)n);
	if (!pg->copy) {
		PyErr_NoMemory();
		goto err_seq;
	}
	for (i = 0; i < n; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
		char iname[48];
		int64_t v;

		snprintf(iname, sizeof(iname), "%s[%zd]", name, i);
		if (get_i64(it, iname, 0, UINT32_MAX, &v) < 0)
			goto err_free;
		pg->copy[i] = (uint32_t)v;
	}
	Py_DECREF(seq);
	pg->p = pg->copy;
	pg->n = (uint32_t)n;
	return 0;

err_free:
	PyMem_Free(pg->copy);
	pg->copy = NULL;
err_seq:
	Py_DECREF(seq);
	return -1;
err_release:
	PyBuffer_Release(&pg->view);
	return -1;
}

static void
pages_put(struct pages *pg)
{
	if (pg->view.obj)
		PyBuffer_Release(&pg->view);
	PyMem_Free(pg->copy);
	memset(pg, 0, sizeof(*pg));
}

static bool
name_char_ok(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '.' || ch == '-';
}

/* One node name: 1..KVX_NAME_MAX-1 bytes of [A-Za-z0-9_.-]; points into o (a str). */
static const char *
node_get(PyObject *o, const char *name)
{
	const char *s;
	Py_ssize_t len;

	if (!PyUnicode_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be a str, not %.100s", name,
			     Py_TYPE(o)->tp_name);
		return NULL;
	}
	s = PyUnicode_AsUTF8AndSize(o, &len);
	if (!s)
		return NULL;
	if (len < 1 || len >= KVX_NAME_MAX) {
		PyErr_Format(PyExc_ValueError, "%s: a node name of 1..%d bytes", name,
			     KVX_NAME_MAX - 1);
		return NULL;
	}
	for (Py_ssize_t j = 0; j < len; j++)
		if (!name_char_ok(s[j])) {
			PyErr_Format(PyExc_ValueError, "%s: %R: node names use [A-Za-z0-9_.-]",
				     name, o);
			return NULL;
		}
	return s;
}

/* Source node names: a sequence of 1..KVX_MAX_SOURCES distinct str, each 1..KVX_NAME_MAX-1
 * characters of [A-Za-z0-9_.-].  names[] points into seq's items (kept by *seqp). */
static int
sources_get(PyObject *o, const char **names, uint32_t *n, PyObject **seqp)
{
	PyObject *seq;
	Py_ssize_t cnt, i, j;

	if (PyUnicode_Check(o) || !PySequence_Check(o)) {
		PyErr_Format(PyExc_TypeError, "sources must be a sequence of str, not %.100s",
			     Py_TYPE(o)->tp_name);
		return -1;
	}
	seq = PySequence_Fast(o, "sources");
	if (!seq)
		return -1;
	cnt = PySequence_Fast_GET_SIZE(seq);
	if (cnt < 1 || cnt > KVX_MAX_SOURCES) {
		PyErr_Format(PyExc_ValueError, "sources: %zd names, must be 1..%d", cnt,
			     KVX_MAX_SOURCES);
		goto err;
	}
	for (i = 0; i < cnt; i++) {
		PyObject *it = PySequence_Fast_GET_ITEM(seq, i);
		char name[24];

		snprintf(name, sizeof(name), "sources[%zd]", i);
		names[i] = node_get(it, name);
		if (!names[i])
			goto err;
		for (j = 0; j < i; j++)
			if (!strcmp(names[i], names[j])) {
				PyErr_Format(PyExc_ValueError, "sources: %R is listed twice", it);
				goto err;
			}
	}
	*n = (uint32_t)cnt;
	*seqp = seq;
	return 0;
err:
	Py_DECREF(seq);
	return -1;
}

/* ---- Conn ---- */

typedef struct {
	PyObject_HEAD struct kvx_conn *c; /* NULL once closed; written under lock */
	PyThread_type_lock lock;	  /* held around every libkvx call on c */
} ConnObject;

/* Take self's lock (waiting with the GIL released) and check the connection is open.
 * Returns 0 with the lock held, or -1 with an exception and the lock not held. */
static int
conn_enter(ConnObject *self)
{
	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS;
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS;
	}
	if (!self->c) {
		PyThread_release_lock(self->lock);
		PyErr_SetString(PyExc_ValueError, "the connection is closed");
		return -1;
	}
	return 0;
}

static void
conn_leave(ConnObject *self)
{
	PyThread_release_lock(self->lock);
}

static int
Conn_init(ConnObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"path", "rank", "wake_ends", NULL};
	PyObject *path_obj, *orank = NULL;
	int wake_ends = 0;
	const char *path;
	struct kvx_conn *c;
	int64_t rank = 0;
	int e;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O&|Op:Conn", kwlist, PyUnicode_FSConverter,
					 &path_obj, &orank, &wake_ends))
		return -1;
	if (orank && get_i64(orank, "rank", 0, KVX_RANK_MAX, &rank) < 0) {
		Py_DECREF(path_obj);
		return -1;
	}
	path = PyBytes_AS_STRING(path_obj);
	if (self->c) {
		Py_DECREF(path_obj);
		PyErr_SetString(PyExc_ValueError, "Conn already connected");
		return -1;
	}
	if ((size_t)PyBytes_GET_SIZE(path_obj) != strlen(path) || !*path) {
		Py_DECREF(path_obj);
		PyErr_SetString(PyExc_ValueError,
				"path: a non-empty socket path without NUL bytes");
		return -1;
	}
	Py_BEGIN_ALLOW_THREADS;
	c = kvx_connect_flags(path, (uint32_t)rank, wake_ends ? KVX_CONNECT_WAKE_ENDS : 0);
	e = errno;
	Py_END_ALLOW_THREADS;
	if (!c) {
		raise_errno(-e, "kvx_connect", path);
		Py_DECREF(path_obj);
		return -1;
	}
	Py_DECREF(path_obj);
	self->c = c;
	return 0;
}

static PyObject *
Conn_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	ConnObject *self = (ConnObject *)type->tp_alloc(type, 0);

	if (!self)
		return NULL;
	self->lock = PyThread_allocate_lock();
	if (!self->lock) {
		Py_DECREF(self);
		return PyErr_NoMemory();
	}
	return (PyObject *)self;
}

static void
Conn_dealloc(ConnObject *self)
{
	/* no other reference exists, so nobody holds the lock */
	if (self->c) {
		struct kvx_conn *c = self->c;

		self->c = NULL;
		Py_BEGIN_ALLOW_THREADS;
		kvx_disconnect(c);
		Py_END_ALLOW_THREADS;
	}
	if (self->lock)
		PyThread_free_lock(self->lock);
	Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
Conn_close(ConnObject *self, PyObject *unused)
{
	struct kvx_conn *c;

	if (!PyThread_acquire_lock(self->lock, NOWAIT_LOCK)) {
		Py_BEGIN_ALLOW_THREADS;
		PyThread_acquire_lock(self->lock, WAIT_LOCK);
		Py_END_ALLOW_THREADS;
	}
	c = self->c;
	self->c = NULL;
	if (c) {
		Py_BEGIN_ALLOW_THREADS;
		kvx_disconnect(c);
		Py_END_ALLOW_THREADS;
	}
	PyThread_release_lock(self->lock);
	Py_RETURN_NONE;
}

static PyObject *
Conn_get_closed(ConnObject *self, void *unused)
{
	return PyBool_FromLong(self->c == NULL);
}

static PyObject *
Conn_get_rank(ConnObject *self, void *unused)
{
	PyObject *r;

	if (conn_enter(self) < 0)
		return NULL;
	r = PyLong_FromUnsignedLong(kvx_rank(self->c));
	conn_leave(self);
	return r;
}

static PyObject *
Conn_get_node_name(ConnObject *self, void *unused)
{
	PyObject *r;

	if (conn_enter(self) < 0)
		return NULL;
	r = PyUnicode_FromString(kvx_node_name(self->c));
	conn_leave(self);
	return r;
}

static PyObject *
Conn_fileno(ConnObject *self, PyObject *unused)
{
	int fd;

	if (conn_enter(self) < 0)
		return NULL;
	fd = kvx_conn_fd(self->c);
	conn_leave(self);
	if (fd < 0)
		return raise_errno(fd, "kvx_conn_fd", NULL);
	return PyLong_FromLong(fd);
}

static PyObject *
Conn_pool_register(ConnObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"memfd", "page_size", "npages", "nbufs", NULL};
	PyObject *ofd, *ops, *onp, *onb;
	struct kvx_pool_geometry g;
	int64_t fd;
	int r;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:pool_register", kwlist, &ofd, &ops, &onp,
					 &onb))
		return NULL;
	if (get_i64(ofd, "memfd", 0, INT_MAX, &fd) < 0 ||
	    get_u32(ops, "page_size", 64, &g.page_size) < 0 ||
	    get_u32(onp, "npages", 1, &g.npages) < 0 || get_u32(onb, "nbufs", 1, &g.nbufs) < 0)
		return NULL;
	if (g.page_size % 64 || g.page_size > PAGE_SIZE_MAX) {
		PyErr_Format(PyExc_ValueError, "page_size %u: a multiple of 64 up to %u",
			     g.page_size, PAGE_SIZE_MAX);
		return NULL;
	}
	if (conn_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_pool_register(self->c, (int)fd, &g);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	if (r < 0)
		return raise_errno(r, "kvx_pool_register", NULL);
	return PyLong_FromLong(r);
}

static PyObject *
Conn_pool_unregister(ConnObject *self, PyObject *arg)
{
	int pool_id, r;

	if (get_pool_id(arg, &pool_id) < 0)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_pool_unregister(self->c, pool_id);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	if (r < 0)
		return raise_errno(r, "kvx_pool_unregister", NULL);
	Py_RETURN_NONE;
}

static PyObject *
Conn_room_open(ConnObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"room", "pool_id", "pages", "sources", NULL};
	PyObject *oroom, *opool, *opages, *osrc, *seq = NULL;
	const char *names[KVX_MAX_SOURCES];
	struct pages pg;
	uint32_t nsrc;
	uint64_t room;
	int pool_id;
	int64_t r;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:room_open", kwlist, &oroom, &opool,
					 &opages, &osrc))
		return NULL;
	if (get_room(oroom, &room) < 0 || get_pool_id(opool, &pool_id) < 0)
		return NULL;
	if (pages_get(opages, "pages", &pg) < 0)
		return NULL;
	if (sources_get(osrc, names, &nsrc, &seq) < 0) {
		pages_put(&pg);
		return NULL;
	}
	if (conn_enter(self) < 0) {
		pages_put(&pg);
		Py_DECREF(seq);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_room_open(self->c, room, pool_id, pg.p, pg.n, names, nsrc);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	pages_put(&pg);
	Py_DECREF(seq);
	if (r < 0)
		return raise_errno((int)r, "kvx_room_open", NULL);
	return PyLong_FromLongLong(r);
}

static PyObject *
Conn_chunk_submit(ConnObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"room",       "chunk_index", "pool_id", "src_pages",
				 "dst_offset", "last",	      NULL};
	PyObject *oroom, *oidx, *opool, *opages, *ooff;
	uint32_t chunk_index, dst_offset;
	struct pages pg;
	uint64_t room;
	int pool_id, last, r;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOp:chunk_submit", kwlist, &oroom, &oidx,
					 &opool, &opages, &ooff, &last))
		return NULL;
	if (get_room(oroom, &room) < 0 || get_u32(oidx, "chunk_index", 0, &chunk_index) < 0 ||
	    get_pool_id(opool, &pool_id) < 0 || get_u32(ooff, "dst_offset", 0, &dst_offset) < 0)
		return NULL;
	if (pages_get(opages, "src_pages", &pg) < 0)
		return NULL;
	/* 64-bit: dst_offset + npages must stay within a room */
	if ((uint64_t)dst_offset + pg.n > KVX_MAX_ROOM_PAGES) {
		PyErr_Format(PyExc_ValueError, "dst_offset %u + %u pages passes %d room pages",
			     dst_offset, pg.n, KVX_MAX_ROOM_PAGES);
		pages_put(&pg);
		return NULL;
	}
	if (conn_enter(self) < 0) {
		pages_put(&pg);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_chunk_submit(self->c, room, chunk_index, pool_id, pg.p, pg.n, dst_offset, last);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	pages_put(&pg);
	if (r < 0)
		return raise_errno(r, "kvx_chunk_submit", NULL);
	Py_RETURN_NONE;
}

/* A sequence (not a str) of lo..hi items, as a new PySequence_Fast, or NULL. */
static PyObject *
seq_get(PyObject *o, const char *name, Py_ssize_t lo, Py_ssize_t hi)
{
	PyObject *seq;
	Py_ssize_t n;

	if (PyUnicode_Check(o) || PyBytes_Check(o) || !PySequence_Check(o)) {
		PyErr_Format(PyExc_TypeError, "%s must be a sequence, not %.100s", name,
			     Py_TYPE(o)->tp_name);
		return NULL;
	}
	seq = PySequence_Fast(o, name);
	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	if (n < lo || n > hi) {
		PyErr_Format(PyExc_ValueError, "%s: %zd items, must be %zd..%zd", name, n, lo, hi);
		Py_DECREF(seq);
		return NULL;
	}
	return seq;
}

/* room_open_regions(room, regions, sources) -> generation
 *   regions: 1..KVX_MAX_REGIONS (pool_id, pages); sources: 1..KVX_MAX_SOURCES
 *   (node, rank, slices), slices a sequence of at most nregions (src_offset, dst_offset,
 *   length) (missing: whole pages). */
static PyObject *
Conn_room_open_regions(ConnObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"room", "regions", "sources", NULL};
	PyObject *oroom, *oreg, *osrc, *rseq = NULL, *sseq = NULL, *res = NULL;
	struct kvx_region reg[KVX_MAX_REGIONS] = {0};
	struct kvx_source src[KVX_MAX_SOURCES] = {0};
	struct pages pg[KVX_MAX_REGIONS] = {0};
	uint32_t nreg = 0, nsrc, i, k;
	uint64_t room, total = 0;
	int64_t r;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOO:room_open_regions", kwlist, &oroom, &oreg,
					 &osrc))
		return NULL;
	if (get_room(oroom, &room) < 0)
		return NULL;
	rseq = seq_get(oreg, "regions", 1, KVX_MAX_REGIONS);
	if (!rseq)
		return NULL;
	for (; nreg < (uint32_t)PySequence_Fast_GET_SIZE(rseq); nreg++) {
		PyObject *opool, *opages;
		char name[32];

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(rseq, nreg),
				      "OO;a region is "
				      "(pool_id, pages)",
				      &opool, &opages) ||
		    get_pool_id(opool, &reg[nreg].pool_id) < 0)
			goto out;
		snprintf(name, sizeof(name), "regions[%u].pages", nreg);
		if (pages_get(opages, name, &pg[nreg]) < 0)
			goto out;
		reg[nreg].npages = pg[nreg].n;
		reg[nreg].pages = pg[nreg].p;
		total += pg[nreg].n;
	}
	if (total > KVX_MAX_ROOM_PAGES) {
		PyErr_Format(PyExc_ValueError, "regions: %llu pages, a room holds at most %d",
			     (unsigned long long)total, KVX_MAX_ROOM_PAGES);
		goto out;
	}
	sseq = seq_get(osrc, "sources", 1, KVX_MAX_SOURCES);
	if (!sseq)
		goto out;
	nsrc = (uint32_t)PySequence_Fast_GET_SIZE(sseq);
	for (i = 0; i < nsrc; i++) {
		PyObject *onode, *orank, *oslices = NULL, *slseq;
		int64_t rank;
		char name[40];

		if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(sseq, i),
				      "OO|O;a source is (node, rank[, slices])", &onode, &orank,
				      &oslices))
			goto out;
		snprintf(name, sizeof(name), "sources[%u].node", i);
		src[i].node = node_get(onode, name);
		snprintf(name, sizeof(name), "sources[%u].rank", i);
		if (!src[i].node || get_i64(orank, name, 0, KVX_RANK_MAX, &rank) < 0)
			goto out;
		src[i].rank = (uint32_t)rank;
		for (k = 0; k < i; k++)
			if (!strcmp(src[k].node, src[i].node) && src[k].rank == src[i].rank) {
				PyErr_Format(PyExc_ValueError,
					     "sources: %s rank %u is listed twice", src[i].node,
					     src[i].rank);
				goto out;
			}
		if (!oslices || oslices == Py_None)
			continue;
		snprintf(name, sizeof(name), "sources[%u].slices", i);
		slseq = seq_get(oslices, name, 0, nreg);
		if (!slseq)
			goto out;
		for (k = 0; k < (uint32_t)PySequence_Fast_GET_SIZE(slseq); k++) {
			PyObject *it = PySequence_Fast_GET_ITEM(slseq, k), *a, *b, *c;
			struct kvx_slice *sl = &src[i].slice[k];

			if (it == Py_None)
				continue;
			if (!PyArg_ParseTuple(it, "OOO;a slice is (src_offset, dst_offset, length)",
					      &a, &b, &c) ||
			    get_u32(a, "src_offset", 0, &sl->src_offset) < 0 ||
			    get_u32(b, "dst_offset", 0, &sl->dst_offset) < 0 ||
			    get_u32(c, "length", 0, &sl->length) < 0) {
				Py_DECREF(slseq);
				goto out;
			}
			/* 64-bit: an offset plus the length stays within a u32 page */
			if ((sl->length == 0 && (sl->src_offset || sl->dst_offset)) ||
			    (uint64_t)sl->src_offset + sl->length > UINT32_MAX ||
			    (uint64_t)sl->dst_offset + sl->length > UINT32_MAX) {
				PyErr_Format(PyExc_ValueError,
					     "sources[%u].slices[%u]: (%u, %u, %u) is not a slice "
					     "(length 0 is the whole page, without offsets)",
					     i, k, sl->src_offset, sl->dst_offset, sl->length);
				Py_DECREF(slseq);
				goto out;
			}
		}
		Py_DECREF(slseq);
	}
	if (conn_enter(self) < 0)
		goto out;
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_room_open_regions(self->c, room, reg, nreg, src, nsrc);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	res = r < 0 ? raise_errno((int)r, "kvx_room_open_regions", NULL) : PyLong_FromLongLong(r);
out:
	for (k = 0; k < KVX_MAX_REGIONS; k++)
		pages_put(&pg[k]);
	Py_XDECREF(rseq);
	Py_XDECREF(sseq); /* the node names point into its items: used up to here */
	return res;
}

#define CHUNKV_MAX 1024 /* kvx_chunk_submitv's batch */

/* chunk_submitv(chunks) -> n: each chunk (room, chunk_index, pool_id, src_pages, dst_offset,
 * last, region, buf_first, buf_count, ndest), all sent in one call (one wake-up of kvxd). */
static PyObject *
Conn_chunk_submitv(ConnObject *self, PyObject *arg)
{
	PyObject *seq = seq_get(arg, "chunks", 1, CHUNKV_MAX), *res = NULL;
	struct kvx_chunk *ch = NULL;
	struct pages *pg = NULL;
	Py_ssize_t n, i;
	int r;

	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	ch = PyMem_Calloc((size_t)n, sizeof(*ch));
	pg = PyMem_Calloc((size_t)n, sizeof(*pg));
	if (!ch || !pg) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++) {
		PyObject *oroom, *oidx, *opool, *opages, *ooff, *olast, *oreg, *ob0, *onb, *ond;
		char name[32];

		if (!PyArg_ParseTuple(
			    PySequence_Fast_GET_ITEM(seq, i),
			    "OOOOOOOOOO;a chunk is (room, chunk_index, pool_id, src_pages, "
			    "dst_offset, last, region, buf_first, buf_count, ndest)",
			    &oroom, &oidx, &opool, &opages, &ooff, &olast, &oreg, &ob0, &onb, &ond))
			goto out;
		if (get_room(oroom, &ch[i].room) < 0 ||
		    get_u32(oidx, "chunk_index", 0, &ch[i].chunk_index) < 0 ||
		    get_pool_id(opool, &ch[i].pool_id) < 0 ||
		    get_u32(ooff, "dst_offset", 0, &ch[i].dst_offset) < 0 ||
		    get_u32(oreg, "region", 0, &ch[i].region) < 0 ||
		    get_u32(ob0, "buf_first", 0, &ch[i].buf_first) < 0 ||
		    get_u32(onb, "buf_count", 0, &ch[i].buf_count) < 0 ||
		    get_u32(ond, "ndest", 0, &ch[i].ndest) < 0)
			goto out;
		ch[i].last = PyObject_IsTrue(olast);
		if (ch[i].last < 0)
			goto out;
		if (ch[i].region >= KVX_MAX_REGIONS || ch[i].ndest > KVX_MAX_DESTS ||
		    (uint64_t)ch[i].buf_first + ch[i].buf_count > UINT32_MAX) {
			PyErr_Format(PyExc_ValueError,
				     "chunks[%zd]: region below %d, ndest up to %d, buf_first + "
				     "buf_count within 32 bits",
				     i, KVX_MAX_REGIONS, KVX_MAX_DESTS);
			goto out;
		}
		snprintf(name, sizeof(name), "chunks[%zd].src_pages", i);
		if (pages_get(opages, name, &pg[i]) < 0)
			goto out;
		ch[i].src_pages = pg[i].p;
		ch[i].npages = pg[i].n;
		if ((uint64_t)ch[i].dst_offset + ch[i].npages > KVX_MAX_ROOM_PAGES) {
			PyErr_Format(PyExc_ValueError,
				     "chunks[%zd]: dst_offset %u + %u pages passes %d room pages",
				     i, ch[i].dst_offset, ch[i].npages, KVX_MAX_ROOM_PAGES);
			goto out;
		}
	}
	if (conn_enter(self) < 0)
		goto out;
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_chunk_submitv(self->c, ch, (uint32_t)n);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	res = r < 0 ? raise_errno(r, "kvx_chunk_submitv", NULL) : PyLong_FromLong(r);
out:
	for (i = 0; pg && i < n; i++)
		pages_put(&pg[i]);
	PyMem_Free(pg);
	PyMem_Free(ch);
	Py_DECREF(seq);
	return res;
}

static PyObject *
Conn_room_abort(ConnObject *self, PyObject *arg)
{
	uint64_t room;
	int64_t r;

	if (get_room(arg, &room) < 0)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_room_abort(self->c, room);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	if (r < 0)
		return raise_errno((int)r, "kvx_room_abort", NULL);
	return PyLong_FromLongLong(r);
}

static PyObject *
Conn_room_close(ConnObject *self, PyObject *arg)
{
	uint64_t room;
	int r;

	if (get_room(arg, &room) < 0)
		return NULL;
	if (conn_enter(self) < 0)
		return NULL;
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_room_close(self->c, room);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	if (r < 0)
		return raise_errno(r, "kvx_room_close", NULL);
	Py_RETURN_NONE;
}

/* room_closev(rooms) -> [status, ...]: kvx_room_closev, one status (0 or -errno) per room */
static PyObject *
Conn_room_closev(ConnObject *self, PyObject *arg)
{
	PyObject *seq = seq_get(arg, "rooms", 1, CHUNKV_MAX), *res = NULL;
	uint64_t *rooms = NULL;
	int *st = NULL;
	Py_ssize_t n, i;
	int r;

	if (!seq)
		return NULL;
	n = PySequence_Fast_GET_SIZE(seq);
	rooms = PyMem_Calloc((size_t)n, sizeof(*rooms));
	st = PyMem_Calloc((size_t)n, sizeof(*st));
	if (!rooms || !st) {
		PyErr_NoMemory();
		goto out;
	}
	for (i = 0; i < n; i++)
		if (get_room(PySequence_Fast_GET_ITEM(seq, i), &rooms[i]) < 0)
			goto out;
	if (conn_enter(self) < 0)
		goto out;
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_room_closev(self->c, rooms, (uint32_t)n, st);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	if (r < 0) {
		res = raise_errno(r, "kvx_room_closev", NULL);
		goto out;
	}
	res = PyList_New(n);
	for (i = 0; res && i < n; i++) {
		PyObject *v = PyLong_FromLong(st[i]);

		if (!v) {
			Py_CLEAR(res);
			break;
		}
		PyList_SET_ITEM(res, i, v);
	}
out:
	PyMem_Free(rooms);
	PyMem_Free(st);
	Py_DECREF(seq);
	return res;
}

/* event_read(max, timeout_ms) -> [(room, generation, state, error, reason), ...] */
static PyObject *
Conn_event_read(ConnObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"max", "timeout_ms", NULL};
	PyObject *omax, *otmo, *list;
	struct kvx_event *ev;
	int64_t max, tmo;
	int r, i;

	if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:event_read", kwlist, &omax, &otmo))
		return NULL;
	if (get_i64(omax, "max", 1, 4096, &max) < 0 ||
	    get_i64(otmo, "timeout_ms", -1, INT_MAX, &tmo) < 0)
		return NULL;
	ev = PyMem_New(struct kvx_event, (size_t)max);
	if (!ev)
		return PyErr_NoMemory();
	if (conn_enter(self) < 0) {
		PyMem_Free(ev);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_event_read(self->c, ev, (int)max, (int)tmo);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	if (r < 0) {
		PyMem_Free(ev);
		return raise_errno(r, "kvx_event_read", NULL);
	}
	list = PyList_New(r);
	if (!list)
		goto out;
	for (i = 0; i < r; i++) {
		/* reason: NUL-terminated by kvxd; bounded here anyway */
		size_t rl = strnlen(ev[i].reason, sizeof(ev[i].reason));
		PyObject *t = Py_BuildValue(
			"(KIiiN)", (unsigned long long)ev[i].room, (unsigned int)ev[i].generation,
			(int)ev[i].state, (int)ev[i].error,
			PyUnicode_DecodeUTF8(ev[i].reason, (Py_ssize_t)rl, "replace"));

		if (!t) {
			Py_CLEAR(list);
			goto out;
		}
		PyList_SET_ITEM(list, i, t);
	}
out:
	PyMem_Free(ev);
	return list;
}

static PyObject *
Conn_admin(ConnObject *self, PyObject *arg)
{
	const char *cmd;
	Py_ssize_t len;
	PyObject *res;
	char *out;
	int r;

	if (!PyUnicode_Check(arg)) {
		PyErr_Format(PyExc_TypeError, "cmd must be a str, not %.100s",
			     Py_TYPE(arg)->tp_name);
		return NULL;
	}
	cmd = PyUnicode_AsUTF8AndSize(arg, &len);
	if (!cmd)
		return NULL;
	if (len < 1 || (size_t)len != strlen(cmd) || (size_t)len >= ADMIN_OUT_MAX) {
		PyErr_SetString(PyExc_ValueError, "cmd: a non-empty command without NUL bytes");
		return NULL;
	}
	out = PyMem_Malloc(ADMIN_OUT_MAX);
	if (!out)
		return PyErr_NoMemory();
	if (conn_enter(self) < 0) {
		PyMem_Free(out);
		return NULL;
	}
	Py_BEGIN_ALLOW_THREADS;
	r = kvx_admin(self->c, cmd, out, ADMIN_OUT_MAX);
	Py_END_ALLOW_THREADS;
	conn_leave(self);
	if (r < 0)
		res = raise_errno(r, "kvx_admin", out);
	else
		res = PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "replace");
	PyMem_Free(out);
	return res;
}

#define KWFN(f) ((PyCFunction)(void (*)(void))(f))

static PyMethodDef Conn_methods[] = {
	{"close", (PyCFunction)Conn_close, METH_NOARGS, "Disconnect (idempotent)."},
	{"fileno", (PyCFunction)Conn_fileno, METH_NOARGS,
	 "The fd that is readable when events may be ready (kvx_conn_fd)."},
	{"pool_register", KWFN(Conn_pool_register), METH_VARARGS | METH_KEYWORDS,
	 "pool_register(memfd, page_size, npages, nbufs) -> pool id"},
	{"pool_unregister", (PyCFunction)Conn_pool_unregister, METH_O, "pool_unregister(pool_id)"},
	{"room_open", KWFN(Conn_room_open), METH_VARARGS | METH_KEYWORDS,
	 "room_open(room, pool_id, pages, sources) -> generation"},
	{"chunk_submit", KWFN(Conn_chunk_submit), METH_VARARGS | METH_KEYWORDS,
	 "chunk_submit(room, chunk_index, pool_id, src_pages, dst_offset, last)"},
	{"room_open_regions", KWFN(Conn_room_open_regions), METH_VARARGS | METH_KEYWORDS,
	 "room_open_regions(room, regions, sources) -> generation; regions: [(pool_id, pages)], "
	 "sources: [(node, rank[, [(src_offset, dst_offset, length) per region]])]"},
	{"chunk_submitv", (PyCFunction)Conn_chunk_submitv, METH_O,
	 "chunk_submitv([(room, chunk_index, pool_id, src_pages, dst_offset, last, region, "
	 "buf_first, buf_count, ndest)]) -> n"},
	{"room_abort", (PyCFunction)Conn_room_abort, METH_O,
	 "room_abort(room) -> abort generation"},
	{"room_close", (PyCFunction)Conn_room_close, METH_O, "room_close(room)"},
	{"room_closev", (PyCFunction)Conn_room_closev, METH_O,
	 "room_closev([room, ...]) -> [status, ...] (0 or -errno per room)"},
	{"event_read", KWFN(Conn_event_read), METH_VARARGS | METH_KEYWORDS,
	 "event_read(max, timeout_ms) -> [(room, generation, state, error, reason)]"},
	{"admin", (PyCFunction)Conn_admin, METH_O, "admin(cmd) -> reply text"},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef Conn_getset[] = {
	{"closed", (getter)Conn_get_closed, NULL, "True once closed", NULL},
	{"node_name", (getter)Conn_get_node_name, NULL, "the kvxd node's name", NULL},
	{"rank", (getter)Conn_get_rank, NULL, "the engine rank this connection declared", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ConnType = {
	PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kvx._kvx.Conn",
	.tp_basicsize = sizeof(ConnObject),
	.tp_flags = Py_TPFLAGS_DEFAULT,
	.tp_doc = "Conn(path, rank=0): a libkvx connection, as engine rank `rank`, to the kvxd "
		  "whose engine socket is path.",
	.tp_new = Conn_new,
	.tp_init = (initproc)Conn_init,
	.tp_dealloc = (destructor)Conn_dealloc,
	.tp_methods = Conn_methods,
	.tp_getset = Conn_getset,
};

/* ---- module ---- */

static PyObject *
mod_version(PyObject *m, PyObject *unused)
{
	return PyUnicode_FromString(kvx_version());
}

static PyObject *
mod_state_str(PyObject *m, PyObject *arg)
{
	int64_t v;

	if (get_i64(arg, "state", INT_MIN, INT_MAX, &v) < 0)
		return NULL;
	return PyUnicode_FromString(kvx_state_str((int)v));
}

static PyMethodDef mod_methods[] = {
	{"version", mod_version, METH_NOARGS, "The loaded libkvx's version (kvx_version)."},
	{"state_str", mod_state_str, METH_O, "kvx_state_str(state)"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef kvx_module = {
	PyModuleDef_HEAD_INIT, .m_name = "kvx._kvx",	 .m_doc = "The libkvx binding (see kvx).",
	.m_size = -1,	       .m_methods = mod_methods,
};

PyMODINIT_FUNC PyInit__kvx(void);

PyMODINIT_FUNC
PyInit__kvx(void)
{
	PyObject *m, *idmax;

	if (PyType_Ready(&ConnType) < 0)
		return NULL;
	m = PyModule_Create(&kvx_module);
	if (!m)
		return NULL;
	kvx_error = PyErr_NewExceptionWithDoc(
		"kvx.Error", "A libkvx call failed: .errno is the errno, .strerror says where.",
		PyExc_OSError, NULL);
	if (!kvx_error || PyModule_AddObjectRef(m, "Error", kvx_error) < 0 ||
	    PyModule_AddObjectRef(m, "Conn", (PyObject *)&ConnType) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_SOURCES", KVX_MAX_SOURCES) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_REGIONS", KVX_MAX_REGIONS) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_DESTS", KVX_MAX_DESTS) < 0 ||
	    PyModule_AddIntConstant(m, "RANK_MAX", KVX_RANK_MAX) < 0 ||
	    PyModule_AddIntConstant(m, "MAX_ROOM_PAGES", KVX_MAX_ROOM_PAGES) < 0 ||
	    PyModule_AddIntConstant(m, "NAME_MAX", KVX_NAME_MAX) < 0 ||
	    PyModule_AddIntConstant(m, "PAGE_SIZE_MAX", PAGE_SIZE_MAX) < 0 ||
	    !(idmax = PyLong_FromUnsignedLongLong(KVX_ROOM_ID_MAX)))
		goto err;
	if (PyModule_AddObjectRef(m, "ROOM_ID_MAX", idmax) < 0) {
		Py_DECREF(idmax);
		goto err;
	}
	Py_DECREF(idmax);
	return m;
err:
	Py_CLEAR(kvx_error);
	Py_DECREF(m);
	return NULL;
}
