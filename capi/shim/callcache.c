/* callcache.c: the C API's call cache (callcache.h). */
#include "callcache.h"

#include "capi.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum {
  kSets = 1024,       /* sets of records, by the communicator's handle */
  kWays = purlinCallWays,
  kCalls = purlinCallOps,
  kRecordBytes = 2048 /* the datapath's part of a record (atom/cuda: about 1.1 KiB) */
};

/* issueFn issues a record with n buffer pairs (atom.Replayer). */
typedef int (*issueFn)(void *rec, const uint64_t *bufs, int n, uintptr_t stream);

/* A record of calls calls. seq is odd while Go writes it (a sequence lock:
 * a reader that sees seq change while it reads takes the slow path); n is
 * the datapath's bytes, 0: empty. */
typedef struct {
  uint64_t seq;
  int32_t calls, n;
  uintptr_t issue;
  purlinCallKey key[kCalls];
  purlinCallFacts facts[kCalls];
  _Alignas(16) unsigned char rec[kRecordBytes];
} entry;

typedef struct {
  uint32_t next; /* the way the next record replaces */
  entry ways[kWays];
} set;

static set *sets[kSets];

enum { kHeld = 64 };

/* A thread's group: how deep it is open, whether Go holds it (inGo), and
 * else the calls it holds in C, in the order they were made (issued: those
 * its end has issued). Made at the thread's first GroupStart and freed when
 * the thread ends; the thread's own storage holds only the pointer (a
 * library that Python, say, opens late gets little of it). */
typedef struct {
  int depth, inGo, n;
  struct {
    purlinCallKey key;
    uint64_t send, recv;
    int issued;
  } held[kHeld];
} groupState;

static __thread groupState *group;
/* off: PURLIN_CALL_CACHE=0, as Go said at the first call it was asked to
 * record: groups then go to Go from their start, as calls do. */
static int off;
static pthread_key_t groupKey;
static pthread_once_t groupOnce = PTHREAD_ONCE_INIT;

/* freeGroup ends a thread's group as the thread exits; a later key's
 * destructor that calls in again on the thread makes a new one. */
static void freeGroup(void *p) {
  group = NULL;
  free(p);
}

static void makeGroupKey(void) { pthread_key_create(&groupKey, freeGroup); }

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

/* The symmetric windows of every communicator, as Go's comm lists them
 * (purlinCallWindows): a call whose collective directs (its facts) and
 * whose output lies in one of its communicator's goes to Go, which pushes
 * it straight into the outputs. Writers take windowLock; readers check
 * windowSeq around their look (odd while written) and, where it moved,
 * take the call for one in a window: Go serves either. A communicator with
 * more windows than the table has room for holds, after those that fit,
 * one entry spanning every address: its calls are all taken for calls in
 * a window until its list fits again. Where not even that entry fits,
 * every such call is taken for one (windowOverflow) from then on. */
enum { kWindows = 64 };
static struct {
  uintptr_t comm;
  uint64_t base, end;
} windowTable[kWindows];
static int windowCount, windowOverflow;
static uint64_t windowSeq;
static pthread_mutex_t windowLock = PTHREAD_MUTEX_INITIALIZER;

/* setWindow writes entry i of the table (under windowLock; readers may
 * look meanwhile, and windowSeq tells them). */
static void setWindow(int i, uintptr_t comm, uint64_t base, uint64_t end) {
  __atomic_store_n(&windowTable[i].comm, comm, __ATOMIC_RELAXED);
  __atomic_store_n(&windowTable[i].base, base, __ATOMIC_RELAXED);
  __atomic_store_n(&windowTable[i].end, end, __ATOMIC_RELAXED);
}

void purlinCallWindows(uintptr_t comm, const uint64_t *ranges, int n) {
  pthread_mutex_lock(&windowLock);
  __atomic_fetch_add(&windowSeq, 1, __ATOMIC_RELAXED);
  /* No store to the table may be seen before the sequence turned odd (a
   * weakly ordered CPU may otherwise show a reader new entries under an even
   * sequence), as purlinCallRecord's writer does. */
  __atomic_thread_fence(__ATOMIC_RELEASE);
  int k = 0;
  for (int i = 0; i < windowCount; i++) {
    if (windowTable[i].comm != comm) setWindow(k++, windowTable[i].comm, windowTable[i].base, windowTable[i].end);
  }
  int room = kWindows - k, fit = n <= room ? n : room - 1;
  for (int i = 0; i < fit; i++) setWindow(k++, comm, ranges[2 * i], ranges[2 * i + 1]);
  if (n > room && room > 0) setWindow(k++, comm, 0, UINT64_MAX); /* the rest: anywhere */
  if (n > 0 && room == 0) __atomic_store_n(&windowOverflow, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&windowCount, k, __ATOMIC_RELAXED);
  __atomic_fetch_add(&windowSeq, 1, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&windowLock);
}

/* inWindow reports whether [recv, recv+out) may lie in one of comm's
 * symmetric windows. */
static int inWindow(uintptr_t comm, uint64_t recv, uint64_t out) {
  uint64_t seq = __atomic_load_n(&windowSeq, __ATOMIC_ACQUIRE);
  int n = __atomic_load_n(&windowCount, __ATOMIC_RELAXED);
  if (seq == 0 && n == 0) return 0; /* no window was ever registered: the common case */
  if ((seq & 1) || __atomic_load_n(&windowOverflow, __ATOMIC_RELAXED)) return 1;
  int in = 0;
  for (int i = 0; i < n && i < kWindows && !in; i++) {
    uintptr_t c = __atomic_load_n(&windowTable[i].comm, __ATOMIC_RELAXED);
    uint64_t base = __atomic_load_n(&windowTable[i].base, __ATOMIC_RELAXED);
    uint64_t end = __atomic_load_n(&windowTable[i].end, __ATOMIC_RELAXED);
    in = c == comm && recv >= base && recv < end && out <= end - recv;
  }
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
  return in || __atomic_load_n(&windowSeq, __ATOMIC_RELAXED) != seq;
}

/* sameKeys reports whether e's first n calls have the keys keys. */
static int sameKeys(const entry *e, const purlinCallKey *keys, int n) {
  for (int i = 0; i < n; i++) {
    if (!sameKey(&e->key[i], &keys[i])) return 0;
  }
  return 1;
}

/* matches reports whether e records the n calls keys with buffers bufs
 * (bufs[2i], bufs[2i+1]: call i's), or, with prefix set, begins with them. */
static int matches(const entry *e, const purlinCallKey *keys, const uint64_t *bufs, int n, int prefix) {
  if (e->n <= 0 || e->n > kRecordBytes || (prefix ? e->calls < n : e->calls != n) || !sameKeys(e, keys, n)) return 0;
  for (int i = 0; i < n; i++) {
    if (!fits(&e->facts[i], bufs[2 * i], bufs[2 * i + 1])) return 0;
    if (e->facts[i].directs && inWindow(keys[i].comm, bufs[2 * i + 1], e->facts[i].out)) return 0;
  }
  return 1;
}

/* known reports whether a record of the n calls keys with buffers bufs,
 * or with prefix set one that begins with them, is there: the checks the
 * calls passed when it was made, they pass again. */
static int known(const purlinCallKey *keys, const uint64_t *bufs, int n, int prefix) {
  set *s = setOf(keys[0].comm);
  if (s == NULL) return 0;
  for (int w = 0; w < kWays; w++) {
    const entry *e = &s->ways[w];
    uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if ((seq & 1) || !matches(e, keys, bufs, n, prefix)) continue;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == seq) return 1; /* else rewritten meanwhile */
  }
  return 0;
}

/* serve issues the n calls keys with buffers bufs by their record: 1 once
 * they are enqueued, 0 where the record declined them or failed, -1 where
 * there is none for them. */
static int serve(const purlinCallKey *keys, const uint64_t *bufs, int n) {
  set *s = setOf(keys[0].comm);
  if (s == NULL) return -1;
  for (int w = 0; w < kWays; w++) {
    entry *e = &s->ways[w];
    uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
    if ((seq & 1) || !matches(e, keys, bufs, n, 0)) continue;
    _Alignas(16) unsigned char rec[kRecordBytes];
    int32_t bytes = e->n;
    issueFn fn = (issueFn)e->issue;
    memcpy(rec, e->rec, (size_t)bytes);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) != seq) return -1; /* rewritten meanwhile */
    return fn(rec, bufs, n, keys[0].stream) == 0;
  }
  return -1;
}

/* heldOn gathers the calls g holds on communicator comm that its end has
 * not issued into keys and bufs, in order, and returns how many. */
static int heldOn(const groupState *g, uintptr_t comm, purlinCallKey *keys, uint64_t *bufs) {
  int m = 0;
  for (int i = 0; i < g->n && m < kCalls; i++) {
    if (g->held[i].key.comm != comm || g->held[i].issued) continue;
    keys[m] = g->held[i].key;
    bufs[2 * m] = g->held[i].send, bufs[2 * m + 1] = g->held[i].recv;
    m++;
  }
  return m;
}

/* joins reports whether a group may hold key beside the m calls keys of its
 * communicator and issue them as one record, as Go launches them as one
 * Plan: none yet, or, on one stream and up to a launch's buffers, sends and
 * receives alone, or collectives of one type and op alone (a run Go
 * merges). Any other mix Go orders among the communicator's calls. */
static int joins(const purlinCallKey *keys, int m, const purlinCallKey *key) {
  if (m == 0) return 1;
  if (m >= kCalls) return 0;
  int p2p = key->coll == capiSendRecv;
  for (int i = 0; i < m; i++) {
    if (keys[i].stream != key->stream || (keys[i].coll == capiSendRecv) != p2p) return 0;
    if (!p2p && (keys[i].dtype != key->dtype || keys[i].op != key->op)) return 0;
  }
  return 1;
}

/* hold keeps a call of the thread's group g in C when joins says it may and
 * a record vouches for it (begins with the communicator's held calls and
 * it), asking Go first where none does: the first call on a communicator
 * Go records alone (as it launches it alone), a later one it only checks
 * (the record of them all is made at the group's end). Anything else moves
 * the group into Go. */
static purlinResult_t hold(groupState *g, purlinCallKey *key, uint64_t send, uint64_t recv) {
  purlinCallKey keys[kCalls];
  uint64_t bufs[2 * kCalls];
  int m = heldOn(g, key->comm, keys, bufs);
  int room = g->n < kHeld && joins(keys, m, key);
  if (room) {
    keys[m] = *key;
    bufs[2 * m] = send, bufs[2 * m + 1] = recv;
  }
  if (room && !known(keys, bufs, m + 1, 1)) {
    int recorded = 0;
    purlinResult_t r = goCollectiveRecord(key, &bufs[2 * m], 1, m == 0, &recorded);
    if (r != purlinSuccess) { /* refused: Go's group refuses it too, and fails (comm.FailGroup) */
      purlinCallFlush();
      return goCollective(key, send, recv, 1);
    }
    if (recorded < 0) __atomic_store_n(&off, 1, __ATOMIC_RELAXED);
    room = recorded > 0 && (m > 0 || known(keys, bufs, 1, 0));
  }
  if (room) {
    g->held[g->n].key = *key;
    g->held[g->n].send = send, g->held[g->n].recv = recv;
    g->held[g->n].issued = 0;
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
    uint64_t bufs[2] = {send, recv};
    if (serve(key, bufs, 1) > 0) return purlinSuccess;
    return goCollective(key, send, recv, 0);
  }
  if (g->inGo) return goCollective(key, send, recv, 1);
  return hold(g, key, send, recv);
}

/* toGo hands g's held calls that its end has not issued to Go's group,
 * which is open, in order, and returns the first error. */
static purlinResult_t toGo(groupState *g) {
  purlinResult_t first = purlinSuccess;
  for (int i = 0; i < g->n; i++) {
    if (g->held[i].issued) continue;
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
  return toGo(g);
}

int purlinCallGroupDepth(void) { return group != NULL ? group->depth : 0; }

purlinResult_t purlinCallGroupStart(void) {
  groupState *g = groupOf();
  if (g == NULL) return purlinSystemError; /* no memory for the group: none is open */
  if (g->depth++ == 0) g->inGo = __atomic_load_n(&off, __ATOMIC_RELAXED), g->n = 0;
  return g->inGo ? goGroup(1) : purlinSuccess;
}

/* issueHeld issues the held calls of communicator comm by their record,
 * recording them first if there is none, and marks them issued; it reports
 * whether they were enqueued. */
static int issueHeld(groupState *g, uintptr_t comm) {
  purlinCallKey keys[kCalls];
  uint64_t bufs[2 * kCalls];
  int m = heldOn(g, comm, keys, bufs), recorded = 0, r = serve(keys, bufs, m);
  if (r < 0 && goCollectiveRecord(keys, bufs, m, 1, &recorded) == purlinSuccess && recorded > 0) {
    r = serve(keys, bufs, m);
  }
  if (r <= 0) return 0;
  for (int i = 0; i < g->n; i++) g->held[i].issued |= g->held[i].key.comm == comm;
  return 1;
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
  /* The outermost group, held in C: each communicator's calls by their
   * record, communicators in the order of their first call (as Go launches
   * them). A record declined (its stream is not its communicator's latest)
   * sends its calls and those of the communicators after it to Go as a
   * group of their own. */
  for (int i = 0; i < g->n; i++) {
    if (g->held[i].issued || issueHeld(g, g->held[i].key.comm)) continue;
    goGroup(1);
    purlinResult_t first = toGo(g), end = goGroup(0);
    return first != purlinSuccess ? first : end;
  }
  g->n = 0;
  return purlinSuccess;
}

void *purlinCallRecord(const purlinCallKey *keys, int n, int *size) {
  if (n < 1 || n > kCalls) return NULL;
  set **slot = &sets[(uint32_t)keys[0].comm % kSets];
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
  /* The keys' own record if they have one (their buffers did not fit), else the next way. */
  entry *e = NULL;
  for (int w = 0; w < kWays && e == NULL; w++) {
    entry *x = &s->ways[w];
    if (x->n > 0 && x->calls == n && sameKeys(x, keys, n)) e = x;
  }
  if (e == NULL) e = &s->ways[__atomic_fetch_add(&s->next, 1, __ATOMIC_RELAXED) % kWays];
  uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
  if ((seq & 1) || !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
    return NULL; /* another thread writes it */
  }
  __atomic_thread_fence(__ATOMIC_RELEASE);
  e->n = 0;
  e->calls = n;
  memcpy(e->key, keys, (size_t)n * sizeof *keys);
  *size = kRecordBytes;
  return e->rec;
}

void purlinCallCommit(void *rec, const purlinCallFacts *facts, int bytes, uintptr_t issue) {
  entry *e = (entry *)((unsigned char *)rec - offsetof(entry, rec));
  memcpy(e->facts, facts, (size_t)e->calls * sizeof *facts);
  e->issue = issue;
  e->n = issue != 0 && bytes > 0 && bytes <= kRecordBytes ? bytes : 0;
  __atomic_fetch_add(&e->seq, 1, __ATOMIC_RELEASE);
}

void purlinCallForget(uintptr_t comm) {
  set *s = setOf(comm);
  if (s == NULL) return;
  for (int w = 0; w < kWays; w++) {
    entry *e = &s->ways[w];
    uint64_t seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED);
    if (e->key[0].comm != comm) continue;
    /* Wait out a writer: it holds the entry for a few copies at most. */
    while ((seq & 1) || !__atomic_compare_exchange_n(&e->seq, &seq, seq + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
      seq = __atomic_load_n(&e->seq, __ATOMIC_RELAXED) & ~(uint64_t)1;
    }
    if (e->key[0].comm == comm) e->n = 0;
    __atomic_fetch_add(&e->seq, 1, __ATOMIC_RELEASE);
  }
}
