/*
 * callcache_unit.c: capi/callcache.c alone, with a fake datapath record and
 * fake Go exports that log what reaches them (the library's suite,
 * callcache.c, checks the cache with the real ones): which calls a record
 * serves, what its issue function receives, what ends a record, and how a
 * group is held in C and handed to Go.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "callcache.h"
#include "capi.h"
#include "harness.h"

/* What reached the fakes, in order: "I<word>" an issue, "C<comm>" goCollective,
 * "R<comm>" goCollectiveRecord recording, "V<comm>" it checking only, "G1"/"G0" goGroup. */
static char trail[512];
static void note(const char* fmt, unsigned long long v) {
  char s[32];
  snprintf(s, sizeof s, fmt, v);
  strncat(trail, s, sizeof trail - strlen(trail) - 1);
}
static void reset(void) { trail[0] = 0; }

static struct {
  int result;     /* an issue's result */
  uint64_t decline; /* an issue of this word returns -1 */
  uint64_t send, recv, word;
  uint64_t bufs[2 * purlinCallOps];
  int n;
  uintptr_t stream;
} issued;

/* fake_issue stands for a datapath's issue function: its record is one word. */
static int fake_issue(void* rec, const uint64_t* bufs, int n, uintptr_t stream) {
  uint64_t word;
  memcpy(&word, rec, sizeof word);
  memset(rec, 0xff, sizeof word); /* the record is the caller's copy */
  if (word == issued.decline) return -1;
  note("I%llu ", word);
  issued.word = word, issued.send = bufs[0], issued.recv = bufs[1], issued.stream = stream, issued.n = n;
  memcpy(issued.bufs, bufs, 2 * (size_t)n * sizeof *bufs);
  return issued.result;
}

/* 64 floats read and written, in place when send == recv. */
static const purlinCallFacts apart = {.in = 256, .out = 256, .align = 4, .inPlaceForm = 1, .inPlace = 0};

/* record_calls records the n calls keys as one launch, word, with facts f
 * (n of them) and bytes of the datapath's part. */
static void record_calls(const purlinCallKey* keys, int n, const purlinCallFacts* f, uint64_t word, int bytes) {
  int size = 0;
  void* rec = purlinCallRecord(keys, n, &size);
  if (rec == NULL || size < 8) {
    FAILF("purlinCallRecord gave %p of %d bytes", rec, size);
    return;
  }
  memcpy(rec, &word, sizeof word);
  purlinCallCommit(rec, f, bytes, (uintptr_t)fake_issue);
}

static void record(const purlinCallKey* k, const purlinCallFacts* f, uint64_t word, int bytes) {
  record_calls(k, 1, f, word, bytes);
}

/* The Go exports: goCollectiveRecord records (word: the communicator's
 * low bits, plus 100 for each call past the first) unless record_mode
 * says it cannot (0), refuses the call (-1) or the cache is off (-2). */
static int record_mode = 1;
purlinResult_t goGroup(int start) {
  note(start ? "G1 " : "G0 ", 0);
  return purlinSuccess;
}
purlinResult_t goCollective(purlinCallKey* key, uintptr_t send, uintptr_t recv, int grouped) {
  (void)send, (void)recv, (void)grouped;
  note("C%llu ", key->comm & 0xff);
  return record_mode == -1 ? purlinInvalidArgument : purlinSuccess; /* as goCollectiveRecord */
}
purlinResult_t goCollectiveRecord(purlinCallKey* keys, uint64_t* bufs, int n, int record, int* recorded) {
  (void)bufs;
  note(record ? "R%llu " : "V%llu ", keys[0].comm & 0xff);
  *recorded = 0;
  if (record_mode == -2) {
    *recorded = -1; /* PURLIN_CALL_CACHE=0 */
    return purlinSuccess;
  }
  if (record_mode < 0) return purlinInvalidArgument;
  if (record_mode > 0) {
    purlinCallFacts f[purlinCallOps];
    for (int i = 0; i < n; i++) {
      f[i] = apart;
      if (keys[i].coll == capiSendRecv) { /* a send reads only, a receive writes only */
        f[i].inPlaceForm = 0;
        if (keys[i].isSend) f[i].out = 0;
        else f[i].in = 0;
      }
    }
    if (record) record_calls(keys, n, f, (keys[0].comm & 0xff) + 100 * (uint64_t)(n - 1), 8);
    *recorded = 1;
  }
  return purlinSuccess;
}

/* key is a call of communicator number c (each test uses its own numbers). */
static purlinCallKey key(int c) {
  purlinCallKey k = {.comm = (1ull << 32) | (uint64_t)c, .stream = 7, .count = 64, .coll = 0, .dtype = 7};
  return k;
}

/* A call for group_of: its key and buffers. */
typedef struct {
  purlinCallKey* key;
  uint64_t send, recv;
} call;

/* group_of makes a group of the n calls and returns GroupEnd's result. */
static purlinResult_t group_of(int n, const call* calls) {
  purlinCallGroupStart();
  for (int i = 0; i < n; i++) purlinCall(calls[i].key, calls[i].send, calls[i].recv);
  return purlinCallGroupEnd();
}

static void expect_trail(const char* want, const char* what) {
  EXPECT(strcmp(trail, want) == 0, "%s: %s, want %s", what, trail, want);
  reset();
}

static void test_serves_its_key(void) {
  purlinCallKey k = key(1);
  reset();
  EXPECT(purlinCall(&k, 0x1000, 0x2000) == purlinSuccess, "call failed");
  expect_trail("C1 ", "an empty cache");
  record(&k, &apart, 42, 8);
  purlinCall(&k, 0x1000, 0x2000);
  expect_trail("I42 ", "the recorded key");
  EXPECT(issued.send == 0x1000 && issued.recv == 0x2000 && issued.stream == 7, "issue got send %#llx recv %#llx stream %lu",
         (unsigned long long)issued.send, (unsigned long long)issued.recv, (unsigned long)issued.stream);
  purlinCall(&k, 0x1000, 0x2000);
  expect_trail("I42 ", "the record after its issue wrote its copy");
  purlinCallKey other[] = {k, k, k, k, k, k, k, k, k};
  other[0].comm ^= 1ull << 33; /* the same slot, another generation */
  other[1].stream++;
  other[2].count++;
  other[3].coll++;
  other[4].dtype++;
  other[5].op++;
  other[6].root++;
  other[7].peer++;
  other[8].isSend++;
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
    purlinCall(&other[i], 0x1000, 0x2000);
    EXPECT(trail[0] == 'C', "key %zu differs and did not go to Go: %s", i, trail);
    reset();
  }
}

static void test_buffers_must_fit(void) {
  purlinCallKey k = key(2);
  record(&k, &apart, 1, 8);
  static const struct {
    uint64_t send, recv;
    int served;
  } cases[] = {
      {0x1000, 0x2000, 1}, {0x1000, 0x1100, 1}, /* just apart */
      {0, 0x2000, 0},      {0x1000, 0, 0},      /* NULL */
      {0x1002, 0x2000, 0}, {0x1000, 0x2001, 0}, /* misaligned */
      {0x1000, 0x1000, 0},                      /* in place: another Plan */
      {0x1000, 0x10fc, 0}, {0x10fc, 0x1000, 0}, /* overlapping */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    reset();
    purlinCall(&k, cases[i].send, cases[i].recv);
    EXPECT((trail[0] == 'I') == cases[i].served, "case %zu: send %#llx recv %#llx: %s", i,
           (unsigned long long)cases[i].send, (unsigned long long)cases[i].recv, trail);
  }
  purlinCallFacts in_place = apart;
  in_place.inPlace = 1;
  in_place.inPlaceOff = 256; /* the input at slice 1 of the output (AllGather's rank 1): send = recv + 256 */
  in_place.out = 512;
  k.count++;
  record(&k, &in_place, 2, 8);
  reset();
  purlinCall(&k, 0x1100, 0x1000);
  purlinCall(&k, 0x1000, 0x1000);
  purlinCall(&k, 0x1000, 0x2000);
  expect_trail("I2 C2 C2 ", "in place at its offset, at another, and apart");
  purlinCallFacts no_input = {.out = 256, .align = 4, .inPlaceForm = 1};
  k.count++;
  record(&k, &no_input, 3, 8);
  purlinCall(&k, 0, 0x2000);
  purlinCall(&k, 0x2000, 0x2000);
  expect_trail("I3 C2 ", "a rank that reads nothing; the same in place");
}

static void test_what_ends_records(void) {
  purlinCallKey k = key(3), mine = key(4);
  record(&k, &apart, 3, 8);
  record(&mine, &apart, 4, 8);
  reset();
  issued.result = 1;
  purlinCall(&k, 0x1000, 0x2000);
  issued.result = 0;
  expect_trail("I3 C3 ", "an issue that failed goes to Go");
  purlinCallForget(k.comm);
  purlinCall(&k, 0x1000, 0x2000);
  purlinCall(&mine, 0x1000, 0x2000);
  expect_trail("C3 I4 ", "a forgotten communicator, then another's record");
  k.count++;
  record(&k, &apart, 3, 0);
  purlinCall(&k, 0x1000, 0x2000);
  expect_trail("C3 ", "an empty record");
}

static void test_ways(void) {
  enum { ways = purlinCallWays };
  purlinCallKey k = key(5);
  char want[256] = "";
  for (int i = 0; i < ways; i++) {
    k.count = 100 + (uint64_t)i;
    record(&k, &apart, (uint64_t)(10 + i), 8);
  }
  reset();
  for (int i = 0; i < ways; i++) {
    k.count = 100 + (uint64_t)i;
    purlinCall(&k, 0x1000, 0x2000);
    snprintf(want + strlen(want), sizeof want - strlen(want), "I%d ", 10 + i);
  }
  expect_trail(want, "a shape a way");
  k.count = 102;
  record(&k, &apart, 99, 8); /* recorded again: its own way */
  k.count = 101;
  purlinCall(&k, 0x1000, 0x2000);
  k.count = 102;
  purlinCall(&k, 0x1000, 0x2000);
  expect_trail("I11 I99 ", "a shape recorded again");
  k.count = 100 + ways;
  record(&k, &apart, 98, 8); /* one shape more takes a way */
  int kept = 0;
  for (int i = 0; i <= ways; i++) {
    k.count = 100 + (uint64_t)i;
    reset();
    purlinCall(&k, 0x1000, 0x2000);
    kept += trail[0] == 'I';
  }
  EXPECT(kept == ways, "%d of %d shapes kept, want %d", kept, ways + 1, ways);
}

static void test_one_writer(void) {
  purlinCallKey k = key(6);
  int size = 0;
  void* rec = purlinCallRecord(&k, 1, &size);
  EXPECT(rec != NULL, "no record to write");
  reset();
  purlinCall(&k, 0x1000, 0x2000);
  expect_trail("C6 ", "a record being written");
  uint64_t word = 6;
  if (rec) memcpy(rec, &word, sizeof word), purlinCallCommit(rec, &apart, 8, (uintptr_t)fake_issue);
  purlinCall(&k, 0x1000, 0x2000);
  expect_trail("I6 ", "the committed record");
}

/* A group of one recorded collective per communicator is held in C and
 * issued at its end, in order, without Go. */
static void test_group_held(void) {
  purlinCallKey a = key(10), b = key(11);
  record(&a, &apart, 10, 8);
  reset();
  EXPECT(purlinCallGroupStart() == purlinSuccess, "GroupStart failed");
  purlinCall(&a, 0x1000, 0x2000);
  purlinCall(&b, 0x1000, 0x2000); /* not recorded yet: Go records it */
  expect_trail("R11 ", "calls held");
  EXPECT(purlinCallGroupEnd() == purlinSuccess, "GroupEnd failed");
  expect_trail("I10 I11 ", "the group's end");
  purlinCallGroupStart();
  purlinCallGroupStart();
  purlinCall(&b, 0x1000, 0x2000);
  purlinCallGroupEnd();
  expect_trail("", "an inner group's end");
  purlinCallGroupEnd();
  expect_trail("I11 ", "the outer group's end");
}

/* Anything but calls a communicator's record can issue together (one
 * collective, collectives of one type and op, sends and receives) moves the
 * group into Go, its held calls first, as deep as it is open. */
static void test_group_to_go(void) {
  purlinCallKey a = key(20), b = key(21), a2 = key(20);
  a2.dtype++; /* another type: Go launches it apart */
  record(&a, &apart, 20, 8);
  reset();
  group_of(2, (call[]){{&a, 0x1000, 0x2000}, {&a, 0x3000, 0x4000}});
  group_of(2, (call[]){{&a, 0x1000, 0x2000}, {&a, 0x3000, 0x4000}});
  expect_trail("V20 R20 I120 I120 ", "two collectives of one type and op on one communicator, twice");
  EXPECT(issued.n == 2 && issued.bufs[2] == 0x3000 && issued.bufs[3] == 0x4000, "the second collective's buffers");
  purlinCallGroupStart();
  purlinCallGroupStart();
  purlinCall(&a, 0x1000, 0x2000);
  purlinCall(&a2, 0x3000, 0x4000);
  expect_trail("G1 G1 C20 C20 ", "a collective of another type on one communicator");
  purlinCall(&b, 0x1000, 0x2000);
  purlinCallGroupEnd();
  purlinCallGroupEnd();
  expect_trail("C21 G0 G0 ", "the group in Go");
  purlinCall(&a, 0x1000, 0x2000);
  expect_trail("I20 ", "a call after the group");

  purlinCallGroupStart();
  purlinCall(&a, 0x1000, 0x2000);
  EXPECT(purlinCallFlush() == purlinSuccess, "flush failed"); /* another entry point */
  purlinCallGroupEnd();
  expect_trail("G1 C20 G0 ", "a flush");

  purlinCallKey send = key(22), recv = key(22);
  send.coll = recv.coll = capiSendRecv;
  send.isSend = 1;
  group_of(2, (call[]){{&a, 0x1000, 0x2000}, {&send, 0x1000, 0}});
  expect_trail("R22 I20 I22 ", "a send alone on its communicator");
  EXPECT(group_of(3, (call[]){{&a, 0x3000, 0x4000}, {&send, 0x1000, 0}, {&recv, 0, 0x2000}}) == purlinSuccess,
         "GroupEnd failed");
  expect_trail("V22 I20 R22 I122 ", "a send and a receive on one communicator");
  EXPECT(issued.n == 2 && issued.bufs[0] == 0x1000 && issued.bufs[1] == 0 && issued.bufs[2] == 0 &&
             issued.bufs[3] == 0x2000,
         "the pair's issue got %d pairs: %#llx %#llx %#llx %#llx", issued.n, (unsigned long long)issued.bufs[0],
         (unsigned long long)issued.bufs[1], (unsigned long long)issued.bufs[2], (unsigned long long)issued.bufs[3]);
  purlinCallKey other = recv;
  other.stream++;
  group_of(2, (call[]){{&send, 0x1000, 0}, {&other, 0, 0x2000}});
  expect_trail("G1 C22 C22 G0 ", "a send and a receive on two streams");
  group_of(6, (call[]){{&send, 0x1000, 0},
                       {&a, 0x3000, 0x4000},
                       {&b, 0x5000, 0x6000},
                       {&recv, 0, 0x2000},
                       {&send, 0x1000, 0},
                       {&a2, 0x1000, 0x2000}}); /* another type on a */
  expect_trail("R21 V22 G1 C22 C20 C21 C22 C22 C20 G0 ", "held calls to Go in their order");

  purlinCallKey c = key(23);
  record_mode = 0; /* Go cannot record it */
  purlinCallGroupStart();
  purlinCall(&a, 0x1000, 0x2000);
  purlinCall(&c, 0x5000, 0x6000);
  purlinCallGroupEnd();
  expect_trail("R23 G1 C20 C23 G0 ", "a call Go cannot record");
  record_mode = -1; /* Go refuses it */
  purlinCallGroupStart();
  purlinCall(&a, 0x1000, 0x2000);
  EXPECT(purlinCall(&c, 0x5000, 0x6000) == purlinInvalidArgument, "a refused call succeeded");
  purlinCallGroupEnd();
  /* Go's group, which fails with it (its end launches none of the calls) */
  expect_trail("R23 G1 C20 C23 G0 ", "a refused call moves the group to Go");
  record_mode = 1;
}

/* A group's sends and receives on each of several communicators are held
 * and issued at its end, each communicator's by one record, in the order
 * of their first calls; the record vouches for them in the next group. */
/* two_pairs makes a group of a send on communicator s->comm, one on t->comm,
 * then a receive on each (their keys: s, t with isSend cleared). */
static void two_pairs(purlinCallKey* s, purlinCallKey* t) {
  purlinCallKey rs = *s, rt = *t;
  rs.isSend = rt.isSend = 0;
  group_of(4, (call[]){{s, 0x1000, 0}, {t, 0x3000, 0}, {&rs, 0, 0x2000}, {&rt, 0, 0x4000}});
}

static void test_group_sends_and_receives(void) {
  enum { n = purlinCallOps };
  purlinCallKey s1 = key(50), r1 = key(50), s2 = key(51);
  s1.coll = r1.coll = s2.coll = capiSendRecv;
  s1.isSend = s2.isSend = 1;
  s1.peer = r1.peer = 1;
  reset();
  two_pairs(&s1, &s2);
  two_pairs(&s1, &s2);
  expect_trail("R50 R51 V50 V51 R50 I150 R51 I151 I150 I151 ", "two communicators' pairs, twice");
  EXPECT(issued.bufs[0] == 0x3000 && issued.bufs[3] == 0x4000, "the second pair's buffers");
  group_of(2, (call[]){{&r1, 0, 0x2000}, {&s1, 0x1000, 0}});
  expect_trail("R50 V50 R50 I150 ", "the receive first: another record");
  group_of(2, (call[]){{&s1, 0x1000, 0}, {&r1, 0, 0x2002}}); /* misaligned */
  expect_trail("V50 R50 G1 C50 C50 G0 ", "buffers no record vouches for, which Go checks (the fake passes them)");

  /* A launch's buffers of sends and receives on one communicator, and one more. */
  purlinCallKey k[n + 1];
  uint64_t word = 52 + 100 * (n - 1);
  for (int i = 0; i <= n; i++) k[i] = s1, k[i].comm = key(52).comm, k[i].isSend = i % 2, k[i].peer = i / 2;
  for (int more = 0; more < 2; more++) {
    purlinCallGroupStart();
    for (int i = 0; i < n + more; i++) purlinCall(&k[i], i % 2 ? 0x1000 : 0, i % 2 ? 0 : 0x2000);
    purlinCallGroupEnd();
  }
  char want[64];
  snprintf(want, sizeof want, "I%llu ", (unsigned long long)word);
  EXPECT(strstr(trail, want) != NULL && strstr(trail, "G1 ") != NULL, "%d calls by one record, then %d through Go: %s",
         n, n + 1, trail);
  reset();

  /* A record declined: its communicator's calls and those after it go to Go. */
  issued.decline = 151;
  two_pairs(&s1, &s2);
  expect_trail("I150 G1 C51 C51 G0 ", "the second communicator's record declined");
  issued.decline = 150;
  two_pairs(&s1, &s2);
  expect_trail("G1 C50 C51 C50 C51 G0 ", "the first communicator's record declined");
  issued.decline = 0;
}

/* A record declined at the group's end (not its communicator's latest
 * stream) sends it and the calls after it to Go as a group. */
static void test_group_declined(void) {
  purlinCallKey a = key(30), b = key(31), c = key(32);
  record(&a, &apart, 30, 8);
  record(&b, &apart, 31, 8);
  record(&c, &apart, 32, 8);
  issued.decline = 31;
  reset();
  purlinCallGroupStart();
  purlinCall(&a, 0x1000, 0x2000);
  purlinCall(&b, 0x1000, 0x2000);
  purlinCall(&c, 0x1000, 0x2000);
  purlinCallGroupEnd();
  expect_trail("I30 G1 C31 C32 G0 ", "a declined record");
  issued.decline = 0;
  purlinCallGroupEnd();
  expect_trail("G0 ", "GroupEnd without a group goes to Go");
}

/* A record of a collective that directs (a copy collective Go pushes
 * straight into outputs in a symmetric window) serves no call whose output
 * lies in one of its communicator's symmetric windows, as Go lists them:
 * such calls go to Go. Other communicators' windows, and outputs beside
 * or running past a window, do not matter; nor do windows to a record of a
 * collective that does not direct. */
static void test_symmetric_windows(void) {
  purlinCallKey k = key(60), other = key(61), staged = key(62);
  purlinCallFacts directs = apart;
  directs.directs = 1;
  record(&k, &directs, 60, 8);
  record(&other, &directs, 61, 8);
  record(&staged, &apart, 62, 8);
  const uint64_t window[] = {0x10000, 0x20000}, elsewhere[] = {0x90000, 0xa0000};
  purlinCallWindows(k.comm, window, 1);
  purlinCallWindows(other.comm, elsewhere, 1);
  reset();
  purlinCall(&k, 0x1000, 0x10000);   /* at the window's start */
  purlinCall(&k, 0x1000, 0x1ff00);   /* its last 256 bytes */
  purlinCall(&k, 0x1000, 0x1ff04);   /* running past its end */
  purlinCall(&k, 0x1000, 0x2000);    /* beside it */
  purlinCall(&other, 0x1000, 0x10000); /* another communicator's window */
  purlinCall(&staged, 0x1000, 0x10000); /* a collective that stages anyway */
  expect_trail("C60 C60 I60 I60 I61 I62 ", "outputs in and out of a symmetric window");
  record_mode = 0; /* Go records no call it pushes into outputs (capi remember) */
  purlinCallGroupStart();
  purlinCall(&k, 0x1000, 0x10000);
  purlinCallGroupEnd();
  expect_trail("R60 G1 C60 G0 ", "a group's call in a window");
  record_mode = 1;
  purlinCallWindows(k.comm, NULL, 0);
  purlinCall(&k, 0x1000, 0x10000);
  expect_trail("I60 ", "the window deregistered");
  purlinCallWindows(other.comm, NULL, 0);
}

/* A communicator with more symmetric windows than the table holds has all
 * its collectives that direct go to Go, even outside its windows, until
 * its list fits again; then the cache serves them as before. */
static void test_many_windows(void) {
  purlinCallKey k = key(63);
  purlinCallFacts directs = apart;
  directs.directs = 1;
  record(&k, &directs, 63, 8);
  uint64_t many[2 * 70];
  for (int i = 0; i < 70; i++) many[2 * i] = 0x100000 + 0x10000 * (uint64_t)i, many[2 * i + 1] = many[2 * i] + 0x1000;
  purlinCallWindows(k.comm, many, 70);
  reset();
  purlinCall(&k, 0x1000, 0x2000); /* in none of them */
  expect_trail("C63 ", "a call beside 70 windows, more than the table holds");
  purlinCallWindows(k.comm, many, 2);
  purlinCall(&k, 0x1000, 0x2000);
  purlinCall(&k, 0x1000, 0x100000);
  expect_trail("I63 C63 ", "the list fits again");
  purlinCallWindows(k.comm, NULL, 0);
}

/* With the cache off (Go says so when first asked to record), groups go to
 * Go from their start. Last: the setting holds for the process. */
static void test_cache_off(void) {
  purlinCallKey a = key(40);
  record_mode = -2;
  reset();
  purlinCallGroupStart();
  purlinCall(&a, 0x1000, 0x2000);
  purlinCallGroupEnd();
  expect_trail("R40 G1 C40 G0 ", "the call that finds the cache off");
  purlinCallGroupStart();
  purlinCall(&a, 0x1000, 0x2000);
  purlinCallGroupEnd();
  expect_trail("G1 C40 G0 ", "a group after it");
  record_mode = 1;
}

/* A thread's group ends with the thread; a destructor of another key that
 * then calls in gets a group of its own, not the freed one (this suite is
 * built with AddressSanitizer, which sees a use after free). */
static pthread_key_t lateKey;
static void late_destructor(void* p) {
  (void)p;
  purlinCallKey k = key(95);
  call c = {&k, 0x1000, 0x2000};
  EXPECT(group_of(1, &c) == purlinSuccess, "a group in a destructor");
}
static void* exiting_thread(void* p) {
  (void)p;
  purlinCallKey k = key(95);
  call c = {&k, 0x1000, 0x2000};
  group_of(1, &c);
  pthread_setspecific(lateKey, &lateKey); /* its destructor runs after the group's */
  return NULL;
}
static void test_group_after_thread_exit(void) {
  purlinCallKey k = key(95);
  record(&k, &apart, 95, 8);
  purlinCallGroupStart(); /* the group's key exists before lateKey */
  purlinCallGroupEnd();
  EXPECT(pthread_key_create(&lateKey, late_destructor) == 0, "pthread_key_create");
  reset();
  pthread_t t;
  pthread_create(&t, NULL, exiting_thread, NULL);
  pthread_join(t, NULL);
  expect_trail("I95 I95 ", "the thread's group, then the destructor's");
}

int main(void) {
  harness_init("callcache_unit", 60);
  RUN(test_serves_its_key);
  RUN(test_buffers_must_fit);
  RUN(test_what_ends_records);
  RUN(test_ways);
  RUN(test_one_writer);
  RUN(test_group_held);
  RUN(test_group_to_go);
  RUN(test_group_sends_and_receives);
  RUN(test_group_declined);
  RUN(test_symmetric_windows);
  RUN(test_many_windows);
  RUN(test_group_after_thread_exit);
  RUN(test_cache_off); /* last: the cache stays off */
  return harness_finish();
}
