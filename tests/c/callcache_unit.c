/*
 * callcache_unit.c: capi/callcache.c alone, with a fake datapath record
 * (the library's suite, callcache.c, checks it with the real ones): which
 * calls a record serves, what its issue function receives, and what ends a
 * record.
 */
#include <string.h>

#include "callcache.h"
#include "harness.h"

static struct {
  int calls, result;
  uint64_t send, recv, word;
  uintptr_t stream;
} issued;

/* fake_issue stands for a datapath's issue function: its record is one word. */
static int fake_issue(void* rec, uint64_t send, uint64_t recv, uintptr_t stream) {
  issued.calls++;
  memcpy(&issued.word, rec, sizeof issued.word);
  memset(rec, 0xff, sizeof issued.word); /* the record is the caller's copy */
  issued.send = send, issued.recv = recv, issued.stream = stream;
  return issued.result;
}

static const purlinCallKey base = {.comm = 0x100000001u, .stream = 7, .count = 64, .coll = 0, .dtype = 7, .op = 0};
/* 64 floats read and written, in place when send == recv. */
static const purlinCallFacts apart = {.in = 256, .out = 256, .align = 4, .inPlaceForm = 1, .inPlace = 0};

static void record(const purlinCallKey* k, const purlinCallFacts* f, uint64_t word, int n) {
  int size = 0;
  void* rec = purlinCallRecord(k, &size);
  if (rec == NULL || size < 8) {
    FAILF("purlinCallRecord gave %p of %d bytes", rec, size);
    return;
  }
  memcpy(rec, &word, sizeof word);
  purlinCallCommit(rec, f, n, (uintptr_t)fake_issue);
}

/* hit calls the cache and reports whether the record issued the call. */
static int hit(const purlinCallKey* k, uint64_t send, uint64_t recv) {
  int before = issued.calls;
  int r = purlinCallCached(k, send, recv);
  if (r && issued.calls != before + 1) FAILF("a hit without its issue");
  return r;
}

static void test_serves_its_key(void) {
  purlinCallKey k = base;
  k.comm += 1 << 8; /* a communicator of its own */
  EXPECT(!hit(&k, 0x1000, 0x2000), "an empty cache served a call");
  record(&k, &apart, 42, 8);
  EXPECT(hit(&k, 0x1000, 0x2000), "the recorded key missed");
  EXPECT(issued.word == 42 && issued.send == 0x1000 && issued.recv == 0x2000 && issued.stream == 7,
         "issue got word %llu send %#llx recv %#llx stream %lu", (unsigned long long)issued.word,
         (unsigned long long)issued.send, (unsigned long long)issued.recv, (unsigned long)issued.stream);
  EXPECT(hit(&k, 0x1000, 0x2000) && issued.word == 42, "the record changed under its issue's copy");
  purlinCallKey other[] = {k, k, k, k, k, k, k, k, k};
  other[0].comm ^= 1ull << 32; /* the same slot, another generation */
  other[1].stream++;
  other[2].count++;
  other[3].coll++;
  other[4].dtype++;
  other[5].op++;
  other[6].root++;
  other[7].peer++;
  other[8].isSend++;
  for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) EXPECT(!hit(&other[i], 0x1000, 0x2000), "key %zu differs, and hit", i);
}

static void test_buffers_must_fit(void) {
  purlinCallKey k = base;
  k.comm += 2 << 8;
  record(&k, &apart, 1, 8);
  static const struct {
    uint64_t send, recv;
    int want;
  } cases[] = {
      {0x1000, 0x2000, 1},  {0x1000, 0x1100, 1},  /* just apart */
      {0, 0x2000, 0},       {0x1000, 0, 0},       /* NULL */
      {0x1002, 0x2000, 0},  {0x1000, 0x2001, 0},  /* misaligned */
      {0x1000, 0x1000, 0},                        /* in place: another Plan */
      {0x1000, 0x10fc, 0},  {0x10fc, 0x1000, 0},  /* overlapping */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    EXPECT(hit(&k, cases[i].send, cases[i].recv) == cases[i].want, "case %zu: send %#llx recv %#llx", i,
           (unsigned long long)cases[i].send, (unsigned long long)cases[i].recv);

  purlinCallFacts in_place = apart;
  in_place.inPlace = 1;
  in_place.inPlaceOff = 256; /* the input at slice 1 of the output (AllGather's rank 1): send = recv + 256 */
  in_place.out = 512;
  k.count++;
  record(&k, &in_place, 2, 8);
  EXPECT(hit(&k, 0x1100, 0x1000), "in place at its offset missed");
  EXPECT(!hit(&k, 0x1000, 0x1000), "in place at another offset hit");
  EXPECT(!hit(&k, 0x1000, 0x2000), "apart hit an in-place record");

  purlinCallFacts no_input = {.out = 256, .align = 4, .inPlaceForm = 1};
  k.count++;
  record(&k, &no_input, 3, 8);
  EXPECT(hit(&k, 0, 0x2000), "a rank that reads nothing needs no sendbuff");
  EXPECT(!hit(&k, 0x2000, 0x2000), "a rank of a rooted collective, in place, hit an apart record");
}

static void test_what_ends_records(void) {
  purlinCallKey k = base, mine = base;
  k.comm += 3 << 8;
  mine.comm += 4 << 8;
  record(&k, &apart, 1, 8);
  record(&mine, &apart, 1, 8);
  purlinCallInGroup(1);
  EXPECT(!hit(&k, 0x1000, 0x2000), "a call in a group was issued");
  purlinCallInGroup(0);
  EXPECT(hit(&k, 0x1000, 0x2000), "a call after the group missed");
  issued.result = -1;
  EXPECT(!hit(&k, 0x1000, 0x2000), "a declined issue counted as served");
  issued.result = 0;
  purlinCallForget(k.comm);
  EXPECT(!hit(&k, 0x1000, 0x2000), "a forgotten communicator's call hit");
  EXPECT(hit(&mine, 0x1000, 0x2000), "forgetting one communicator dropped another's record");
  k.count++;
  record(&k, &apart, 1, 0);
  EXPECT(!hit(&k, 0x1000, 0x2000), "an empty record served a call");
}

static void test_ways(void) {
  purlinCallKey k = base;
  k.comm += 5 << 8;
  for (int i = 0; i < 4; i++) {
    k.count = 100 + (uint64_t)i;
    record(&k, &apart, (uint64_t)i, 8);
  }
  for (int i = 0; i < 4; i++) {
    k.count = 100 + (uint64_t)i;
    EXPECT(hit(&k, 0x1000, 0x2000) && issued.word == (uint64_t)i, "shape %d of 4 missed", i);
  }
  k.count = 102;
  record(&k, &apart, 9, 8); /* recorded again: its own way */
  for (int i = 0; i < 4; i++) {
    k.count = 100 + (uint64_t)i;
    EXPECT(hit(&k, 0x1000, 0x2000), "shape %d lost its record to another's new one", i);
  }
  k.count = 102;
  EXPECT(hit(&k, 0x1000, 0x2000) && issued.word == 9, "the new record of shape 2 was not used");
  k.count = 104;
  record(&k, &apart, 4, 8); /* a fifth shape takes a way */
  int kept = 0;
  for (int i = 0; i < 5; i++) {
    k.count = 100 + (uint64_t)i;
    kept += hit(&k, 0x1000, 0x2000);
  }
  EXPECT(kept == 4, "%d of 5 shapes kept, want 4", kept);
}

static void test_one_writer(void) {
  purlinCallKey k = base;
  k.comm += 6 << 8;
  int size = 0;
  void* rec = purlinCallRecord(&k, &size);
  EXPECT(rec != NULL, "no record to write");
  EXPECT(!hit(&k, 0x1000, 0x2000), "a record being written served a call");
  if (rec) purlinCallCommit(rec, &apart, 8, (uintptr_t)fake_issue);
  EXPECT(hit(&k, 0x1000, 0x2000), "the committed record missed");
}

int main(void) {
  harness_init("callcache_unit", 60);
  RUN(test_serves_its_key);
  RUN(test_buffers_must_fit);
  RUN(test_what_ends_records);
  RUN(test_ways);
  RUN(test_one_writer);
  return harness_finish();
}
