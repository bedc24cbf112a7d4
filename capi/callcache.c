/* callcache.c: the C API's call cache (callcache.h). */
#include "callcache.h"

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
static __thread int inGroup;

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

int purlinCallCached(const purlinCallKey *key, uint64_t send, uint64_t recv) {
  set *s = setOf(key->comm);
  if (s == NULL || inGroup) return 0;
  for (int w = 0; w < kWays; w++) {
    entry *e = &s->ways[w];
    uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if ((seq & 1) || e->n <= 0 || e->n > kRecordBytes || !sameKey(&e->key, key) || !fits(&e->facts, send, recv)) continue;
    _Alignas(16) unsigned char rec[kRecordBytes];
    int32_t n = e->n;
    issueFn issue = (issueFn)e->issue;
    memcpy(rec, e->rec, (size_t)n);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq) return 0; /* rewritten meanwhile */
    return issue(rec, send, recv, key->stream) == 0;
  }
  return 0;
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

void purlinCallInGroup(int open) { inGroup = open; }
