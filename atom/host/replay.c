/* replay.c: the host Atom's issue function for a recorded launch
 * (atom.Replayer): the record holds an id, and Go launches what it names. */
#include <stdint.h>
#include <string.h>

#include "_cgo_export.h"

__attribute__((visibility("hidden"))) int purlin_host_replay(void *rec, const uint64_t *bufs, int n, uintptr_t stream) {
  uint64_t id;
  memcpy(&id, rec, sizeof id);
  return goHostReplay(id, (uint64_t *)bufs, n, stream);
}
