/* callcache.c: the C API's call cache (callcache.h). */
#include "callcache.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum {
  kSets = 1024,       /* sets of records, by the communicator's handle */
  kWays = 4,          /* records of one set: the shapes a communicator alternates */
  kRecordBytes = 2048 /* the datapath's part of a record (atom/cuda: about 1.1 KiB) */
};

typedef int (*issueFn)(void *rec, uint64_t send, uint64_t recv, uintptr_t stream);

/* A record. seq is odd while Go writes it (a sequence lock: a reader that
 * sees seq change while it copies takes the slow path); n == 0: empty. */
typedef struct {
  uint64_t seq;
  purlinCallKey key;
  purlinCallFacts facts;
  uintptr_t issue;
  int32_t n;
  _Alignas(16) unsigned char rec[kRecordBytes];
} entry;

typedef struct {
  uint32_t next; /* the way the next record replaces */
  entry ways[kWays];
} set;

static set *sets[kSets];

enum { kHeld = 64 };

/* A thread's group: how deep it is open, whether Go holds it (inGo), and
 * else the calls it holds in C, in the order they were made. Made at the
 * thread's first GroupStart and freed when the thread ends; the thread's
 * own storage holds only the pointer (a library that Python, say, opens
 * late gets little of it). */
typedef struct {
  int depth, inGo, n;
  struct {
    purlinCallKey key;
    uint64_t send, recv;
  } held[kHeld];
} groupState;

static __thread groupState *group;
/* off: PURLIN_CALL_CACHE=0, as Go said at the first call it was asked to
 * record: groups then go to Go from their start, as calls do. */
static int off;
static pthread_key_t groupKey;
static pthread_once_t groupOnce = PTHREAD_ONCE_INIT;

static void makeGroupKey(void) { pthread_key_create(&groupKey, free); }

/* groupOf is the thread's group, made if need be; NULL if it cannot be. */
static groupState *groupOf(void) {
  if (group == NULL) {
    pthread_once(&groupOnce, makeGroupKey);
    group = calloc(1, sizeof *group);
    if (group != NULL) pthread_setspecific(groupKey, group);
  }
  return group;
}

static set *setOf(uintptr_t comm) { return __atomic_load_n(&sets[(uint32_t)comm % kSets], __ATOMIC_ACQUIRE); }

static int sameKey(const purlinCallKey *a, const purlinCallKey *b) {
  return a->comm == b->comm && a->stream == b->stream && a->count == b->count && a->coll == b->coll &&
         a->dtype == b->dtype && a->op == b->op && a->root == b->root && a->peer == b->peer &&
         a->isSend == b->isSend;
}

/* fits reports whether send and recv pass Go's checks of them
 * (spec.Call.Validate) with the conclusions f records, so that the Plan
 * chosen for f's call is this one's too. */
static int fits(const purlinCallFacts *f, uint64_t send, uint64_t recv) {
  if (f->in && (send == 0 || send % f->align)) return 0;
  if (f->out && (recv == 0 || recv % f->align)) return 0;
  int inPlace = f->inPlaceForm && send - recv == f->inPlaceOff;
  if (inPlace != f->inPlace) return 0;
  int disjoint = !f->in || !f->out || send + f->in <= recv || recv + f->out <= send;
  return disjoint || inPlace;
}

/* serve looks for a record of key that send and recv fit. With issue set it
 * issues the call by it and reports whether it was enqueued; else it
 * reports whether there is one. */
static int serve(const purlinCallKey *key, uint64_t send, uint64_t recv, int issue) {
  set *s = setOf(key->comm);
  if (s == NULL) return 0;
  for (int w = 0; w < kWays; w++) {
    entry *e = &s->ways[w];
    uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if ((seq & 1) || e->n <= 0 || e->n > kRecordBytes || !sameKey(&e->key, key) || !fits(&e->facts, send, recv)) continue;
    if (!issue) return 1;
    _Alignas(16) unsigned char rec[kRecordBytes];
    int32_t n = e->n;
    issueFn fn = (issueFn)e->issue;
    memcpy(rec, e->rec, (size_t)n);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq) return 0; /* rewritten meanwhile */
    return fn(rec, send, recv, key->stream) == 0;
  }
  return 0;
}

/* hold keeps a call of the thread's group g in C when it is recorded and
 * on a communicator the group holds no call of (Go launches such a call
 * alone, as outside a group; two on one communicator it may merge, as it
 * does a send and a receive), recording it first where Go can; anything
 * else moves the group into Go. */
static purlinResult_t hold(groupState *g, purlinCallKey *key, uint64_t send, uint64_t recv) {
  int room = g->n < kHeld;
  for (int i = 0; i < g->n && room; i++) room = g->held[i].key.comm != key->comm;
  if (room && !serve(key, send, recv, 0)) {
    int recorded = 0;
    purlinResult_t r = goCollectiveRecord(key, send, recv, &recorded);
    if (r != purlinSuccess) return r; /* refused, as Go's group refuses it */
    if (recorded < 0) __atomic_store_n(&off, 1, __ATOMIC_RELAXED);
    room = recorded > 0 && serve(key, send, recv, 0);
  }
  if (room) {
    g->held[g->n].key = *key;
    g->held[g->n].send = send, g->held[g->n].recv = recv;
    g->n++;
    return purlinSuccess;
  }
  purlinResult_t f = purlinCallFlush();
  purlinResult_t r = goCollective(key, send, recv, 1);
  return r != purlinSuccess ? r : f;
}

purlinResult_t purlinCall(purlinCallKey *key, uint64_t send, uint64_t recv) {
  groupState *g = group;
  if (g == NULL || g->depth == 0) {
    if (serve(key, send, recv, 1)) return purlinSuccess;
    return goCollective(key, send, recv, 0);
  }
  if (g->inGo) return goCollective(key, send, recv, 1);
  return hold(g, key, send, recv);
}

/* toGo hands g's held calls [from, n) to Go's group, which is open, and
 * returns the first error. */
static purlinResult_t toGo(groupState *g, int from) {
  purlinResult_t first = purlinSuccess;
  for (int i = from; i < g->n; i++) {
    purlinResult_t r = goCollective(&g->held[i].key, g->held[i].send, g->held[i].recv, 1);
    if (first == purlinSuccess) first = r;
  }
  g->n = 0;
  return first;
}

purlinResult_t purlinCallFlush(void) {
  groupState *g = group;
  if (g == NULL || g->depth == 0 || g->inGo) return purlinSuccess;
  g->inGo = 1;
  for (int d = 0; d < g->depth; d++) goGroup(1);
  return toGo(g, 0);
}

purlinResult_t purlinCallGroupStart(void) {
  groupState *g = groupOf();
  if (g == NULL) return goGroup(1); /* no memory for it: Go holds it, C counts nothing */
  if (g->depth++ == 0) g->inGo = __atomic_load_n(&off, __ATOMIC_RELAXED), g->n = 0;
  return g->inGo ? goGroup(1) : purlinSuccess;
}

purlinResult_t purlinCallGroupEnd(void) {
  groupState *g = group;
  if (g == NULL || g->depth == 0) return goGroup(0); /* Go's group, or Go says what is wrong */
  g->depth--;
  if (g->inGo) {
    if (g->depth == 0) g->inGo = 0;
    return goGroup(0);
  }
  if (g->depth > 0) return purlinSuccess;
  /* The outermost group, held in C: each call by its record, in order. A
   * record declined (its stream is not its communicator's latest) sends it
   * and the rest to Go as a group of their own. */
  for (int i = 0; i < g->n; i++) {
    if (serve(&g->held[i].key, g->held[i].send, g->held[i].recv, 1)) continue;
    goGroup(1);
    purlinResult_t first = toGo(g, i), end = goGroup(0);
    return first != purlinSuccess ? first : end;
  }
  g->n = 0;
  return purlinSuccess;
}

void *purlinCallRecord(const purlinCallKey *key, int *size) {
  set **slot = &sets[(uint32_t)key->comm % kSets];
  set *s = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
  if (s == NULL) {
    set *fresh = calloc(1, sizeof(set));
    if (fresh == NULL) return NULL;
    if (!__atomic_compare_exchange_n(slot, &s, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
      free(fresh); /* another thread's set is in place: s */
    } else {
      s = fresh;
    }
  }
  /* The key's own record if it has one (its buffers did not fit), else the next way. */
  entry *e = NULL;
  for (int w = 0; w < kWays && e == NULL; w++) {
    if (s->ways[w].n > 0 && sameKey(&s->ways[w].key, key)) e = &s->ways[w];
  }
  if (e == NULL) e = &s->ways[__atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED) % kWays];
  uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
  if ((seq & 1) || !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    return NULL; /* another thread writes it */
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
  e->n = 0;
  e->key = *key;
  *size = kRecordBytes;
  return e->rec;
}

void purlinCallCommit(void *rec, const purlinCallFacts *facts, int n, uintptr_t issue) {
  entry *e = (entry *)((unsigned char *)rec - offsetof(entry, rec));
  e->facts = *facts;
  e->issue = issue;
  e->n = issue != 0 && n > 0 && n <= kRecordBytes ? n : 0;
  __atomic_fetch_add(&e->seq, 1, __ATOMIC_RELEASE);
}

void purlinCallForget(uintptr_t comm) {
  set *s = setOf(comm);
  if (s == NULL) return;
  for (int w = 0; w < kWays; w++) {
    entry *e = &s->ways[w];
    uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    if (e->key.comm != comm) continue;
    /* Wait out a writer: it holds the entry for a few copies at most. */
    while ((seq & 1) || !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED) & ~(uint64_t)1;
    }
    if (e->key.comm == comm) e->n = 0;
    __atomic_fetch_add(&e->seq, 1, __ATOMIC_RELEASE);
  }
}
