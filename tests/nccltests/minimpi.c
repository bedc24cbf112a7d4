/*
 * tests/nccltests/minimpi.c: the MPI subset of mpi.h, for running NVIDIA's
 * nccl-tests as several processes of one machine (see mpi.h and run.sh).
 *
 * One exchange serves every collective: each member of a communicator sends
 * its bytes to the hub, and once all members of that communicator's next
 * round have, the hub sends every member all the contributions in rank
 * order. A process whose peer died, or that loses the hub, exits with a
 * message instead of waiting: the hub exits when a connection closes before
 * MPI_Finalize, which closes every other process's connection.
 */
#define _GNU_SOURCE
#include "mpi.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { maxComms = 64, connectTimeoutS = 60 };
enum kind { kindHello = 1, kindRound = 2, kindBye = 3 };

struct header {
  uint32_t kind;
  uint32_t worldRank;
  uint64_t comm; /* the communicator's id, equal on all its members */
  uint64_t seq;  /* the round on that communicator */
  uint32_t members;
  uint32_t member;
  uint64_t len;
};

struct comm {
  int used;
  uint64_t id;
  int size, rank;
  uint64_t seq;
};

static struct comm comms[maxComms];
static int worldRank, worldSize = 1;
static int hubConn = -1;            /* this process's connection to the hub */
static int hubListen = -1;          /* world rank 0 only */
static char hubPath[sizeof(((struct sockaddr_un *)0)->sun_path)];
static pthread_t hubThread;
static pthread_mutex_t exchangeLock = PTHREAD_MUTEX_INITIALIZER;

static void fatal(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "minimpi (rank %d): ", worldRank);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  _exit(1);
}

/* readFull returns 0 at a clean end of stream before any byte, 1 when n bytes were read. */
static int readFull(int fd, void *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)p + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fatal("read: %s", strerror(errno));
    if (r == 0) {
      if (got == 0) return 0;
      fatal("connection closed mid-message");
    }
    got += (size_t)r;
  }
  return 1;
}

static void writeFull(int fd, const void *p, size_t n) {
  size_t put = 0;
  while (put < n) {
    ssize_t w = send(fd, (const char *)p + put, n - put, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fatal("write: %s", strerror(errno));
    put += (size_t)w;
  }
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) fatal("out of memory");
  return p;
}

/* ---------- the hub: a thread of world rank 0 ---------- */

struct round {
  uint64_t comm, seq;
  uint32_t members, arrived;
  int *fd;
  uint64_t *len;
  char **data;
  struct round *next;
};

static void finishRound(struct round *r) {
  for (uint32_t i = 0; i < r->members; i++) {
    writeFull(r->fd[i], r->len, r->members * sizeof(uint64_t));
    for (uint32_t j = 0; j < r->members; j++) writeFull(r->fd[i], r->data[j], r->len[j]);
  }
  for (uint32_t i = 0; i < r->members; i++) free(r->data[i]);
  free(r->fd);
  free(r->len);
  free(r->data);
  free(r);
}

static void *hubMain(void *arg) {
  (void)arg;
  int n = worldSize;
  struct pollfd *pfd = xmalloc((size_t)(n + 1) * sizeof *pfd);
  int *rankOf = xmalloc((size_t)(n + 1) * sizeof *rankOf);
  int conns = 0, byes = 0;
  struct round *rounds = NULL;
  pfd[0] = (struct pollfd){.fd = hubListen, .events = POLLIN};
  while (byes < n) {
    if (poll(pfd, (nfds_t)(conns + 1), -1) < 0) {
      if (errno == EINTR) continue;
      fatal("hub poll: %s", strerror(errno));
    }
    if ((pfd[0].revents & POLLIN) && conns < n) {
      int c = accept(hubListen, NULL, NULL);
      if (c < 0) fatal("hub accept: %s", strerror(errno));
      conns++;
      pfd[conns] = (struct pollfd){.fd = c, .events = POLLIN};
      rankOf[conns] = -1;
      if (conns == n) pfd[0].fd = -1; /* everyone is here */
    }
    for (int i = 1; i <= conns; i++) {
      if (pfd[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      struct header h;
      if (!readFull(pfd[i].fd, &h, sizeof h)) {
        fatal("world rank %d's process ended without MPI_Finalize; stopping every rank", rankOf[i]);
      }
      if (h.kind == kindHello) {
        rankOf[i] = (int)h.worldRank;
      } else if (h.kind == kindBye) {
        close(pfd[i].fd);
        pfd[i].fd = -1;
        byes++;
      } else if (h.kind == kindRound) {
        struct round **pr = &rounds;
        while (*pr && !((*pr)->comm == h.comm && (*pr)->seq == h.seq)) pr = &(*pr)->next;
        struct round *r = *pr;
        if (!r) {
          r = xmalloc(sizeof *r);
          *r = (struct round){.comm = h.comm, .seq = h.seq, .members = h.members};
          r->fd = xmalloc(h.members * sizeof *r->fd);
          r->len = calloc(h.members, sizeof *r->len);
          r->data = calloc(h.members, sizeof *r->data);
          if (!r->len || !r->data) fatal("out of memory");
          *pr = r;
        }
        if (h.members != r->members || h.member >= r->members || r->data[h.member]) {
          fatal("world rank %d: inconsistent round (comm %llx seq %llu member %u of %u)", rankOf[i],
                (unsigned long long)h.comm, (unsigned long long)h.seq, h.member, h.members);
        }
        r->fd[h.member] = pfd[i].fd;
        r->len[h.member] = h.len;
        r->data[h.member] = xmalloc(h.len);
        readFull(pfd[i].fd, r->data[h.member], h.len);
        if (++r->arrived == r->members) {
          *pr = r->next;
          finishRound(r);
        }
      } else {
        fatal("hub: unknown message kind %u", h.kind);
      }
    }
  }
  free(pfd);
  free(rankOf);
  return NULL;
}

/* ---------- the client side ---------- */

/* exchange sends len bytes as this member's contribution to comm's next round
 * and returns every member's contribution, in rank order, in one buffer
 * (caller frees); lens[i] (lens has comm->size entries) is member i's length. */
static char *exchange(struct comm *c, const void *data, uint64_t len, uint64_t *lens) {
  if (c->size == 1) {
    char *out = xmalloc(len);
    if (len) memcpy(out, data, len);
    lens[0] = len;
    c->seq++;
    return out;
  }
  pthread_mutex_lock(&exchangeLock);
  struct header h = {.kind = kindRound, .worldRank = (uint32_t)worldRank, .comm = c->id,
                     .seq = c->seq++, .members = (uint32_t)c->size, .member = (uint32_t)c->rank,
                     .len = len};
  writeFull(hubConn, &h, sizeof h);
  writeFull(hubConn, data, len);
  if (!readFull(hubConn, lens, (size_t)c->size * sizeof(uint64_t))) {
    fatal("the hub (world rank 0) is gone: a rank failed");
  }
  uint64_t total = 0;
  for (int i = 0; i < c->size; i++) total += lens[i];
  char *out = xmalloc(total);
  readFull(hubConn, out, total);
  pthread_mutex_unlock(&exchangeLock);
  return out;
}

static struct comm *commOf(MPI_Comm handle) {
  if (handle < 0 || handle >= maxComms || !comms[handle].used) {
    fatal("invalid communicator handle %d", handle);
  }
  return &comms[handle];
}

static size_t typeSize(MPI_Datatype t) {
  switch (t) {
  case MPI_BYTE:
  case MPI_CHAR: return 1;
  case MPI_INT:
  case MPI_UNSIGNED:
  case MPI_FLOAT: return 4;
  case MPI_LONG:
  case MPI_UNSIGNED_LONG:
  case MPI_LONG_LONG:
  case MPI_INT64_T:
  case MPI_UINT64_T:
  case MPI_DOUBLE: return 8;
  }
  fatal("unsupported datatype %d", t);
  return 0;
}

static int connectHub(const char *path) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof a.sun_path) fatal("MINIMPI_HUB path too long: %s", path);
  strcpy(a.sun_path, path);
  struct timespec start, now, nap = {0, 10 * 1000 * 1000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s < 0) fatal("socket: %s", strerror(errno));
    if (connect(s, (struct sockaddr *)&a, sizeof a) == 0) return s;
    int e = errno;
    close(s);
    clock_gettime(CLOCK_MONOTONIC, &now);
    /* ENOENT: rank 0 has not bound the socket yet. ECONNREFUSED: bound and not
     * listening yet (an instant), or its process is gone. */
    long waited = now.tv_sec - start.tv_sec;
    if ((e != ENOENT && e != ECONNREFUSED) || waited > connectTimeoutS || (e == ECONNREFUSED && waited > 1)) {
      fatal("cannot reach the hub at %s: %s", path, strerror(e));
    }
    nanosleep(&nap, NULL);
  }
}

int MPI_Init(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *rank = getenv("MINIMPI_RANK"), *size = getenv("MINIMPI_SIZE");
  const char *hub = getenv("MINIMPI_HUB");
  if (rank && size && hub) {
    worldRank = atoi(rank);
    worldSize = atoi(size);
    if (worldSize < 1 || worldRank < 0 || worldRank >= worldSize) {
      fatal("MINIMPI_RANK=%s MINIMPI_SIZE=%s make no sense", rank, size);
    }
  }
  comms[MPI_COMM_WORLD] = (struct comm){.used = 1, .id = 1, .size = worldSize, .rank = worldRank};
  if (worldSize == 1) return MPI_SUCCESS;
  if (worldRank == 0) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(hub) >= sizeof a.sun_path) fatal("MINIMPI_HUB path too long: %s", hub);
    strcpy(a.sun_path, hub);
    strcpy(hubPath, hub);
    hubListen = socket(AF_UNIX, SOCK_STREAM, 0);
    if (hubListen < 0 || bind(hubListen, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(hubListen, worldSize) != 0) {
      fatal("cannot listen at %s: %s", hub, strerror(errno));
    }
    if (pthread_create(&hubThread, NULL, hubMain, NULL) != 0) fatal("cannot start the hub");
  }
  hubConn = connectHub(hub);
  struct header h = {.kind = kindHello, .worldRank = (uint32_t)worldRank};
  writeFull(hubConn, &h, sizeof h);
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  if (hubConn < 0) return MPI_SUCCESS;
  struct header h = {.kind = kindBye, .worldRank = (uint32_t)worldRank};
  writeFull(hubConn, &h, sizeof h);
  close(hubConn);
  hubConn = -1;
  if (worldRank == 0) {
    pthread_join(hubThread, NULL);
    close(hubListen);
    unlink(hubPath);
  }
  return MPI_SUCCESS;
}

int MPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;
  fprintf(stderr, "minimpi (rank %d): MPI_Abort(%d)\n", worldRank, errorcode);
  _exit(errorcode ? errorcode : 1);
}

int MPI_Comm_rank(MPI_Comm comm, int *rank) {
  *rank = commOf(comm)->rank;
  return MPI_SUCCESS;
}

int MPI_Comm_size(MPI_Comm comm, int *size) {
  *size = commOf(comm)->size;
  return MPI_SUCCESS;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm) {
  struct comm *c = commOf(comm);
  uint64_t splitSeq = c->seq;
  int mine[2] = {color, key};
  uint64_t *lens = xmalloc((size_t)c->size * sizeof *lens);
  int *all = (int *)exchange(c, mine, sizeof mine, lens);
  free(lens);
  *newcomm = MPI_COMM_NULL;
  if (color == MPI_UNDEFINED) {
    free(all);
    return MPI_SUCCESS;
  }
  /* This member's rank: members of its color ordered by (key, parent rank). */
  int size = 0, rank = 0;
  for (int i = 0; i < c->size; i++) {
    if (all[2 * i] != color) continue;
    size++;
    int k = all[2 * i + 1];
    if (k < key || (k == key && i < c->rank)) rank++;
  }
  free(all);
  int h = 1;
  while (h < maxComms && comms[h].used) h++;
  if (h == maxComms) fatal("more than %d communicators", maxComms);
  uint64_t id = c->id * 0x9E3779B97F4A7C15ull ^ (splitSeq + 1) * 0xC2B2AE3D27D4EB4Full ^
                (uint64_t)(uint32_t)color;
  comms[h] = (struct comm){.used = 1, .id = id, .size = size, .rank = rank};
  *newcomm = h;
  return MPI_SUCCESS;
}

int MPI_Comm_free(MPI_Comm *comm) {
  if (*comm == MPI_COMM_WORLD) fatal("MPI_Comm_free(MPI_COMM_WORLD)");
  commOf(*comm)->used = 0;
  *comm = MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int MPI_Barrier(MPI_Comm comm) {
  struct comm *c = commOf(comm);
  uint64_t *lens = xmalloc((size_t)c->size * sizeof *lens);
  free(exchange(c, NULL, 0, lens));
  free(lens);
  return MPI_SUCCESS;
}

int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  struct comm *c = commOf(comm);
  size_t n = (size_t)count * typeSize(datatype);
  if (root < 0 || root >= c->size) fatal("MPI_Bcast: root %d of %d", root, c->size);
  uint64_t *lens = xmalloc((size_t)c->size * sizeof *lens);
  char *all = exchange(c, buffer, c->rank == root ? n : 0, lens);
  if (lens[root] != n) fatal("MPI_Bcast: the root sent %llu bytes, expected %zu", (unsigned long long)lens[root], n);
  size_t off = 0;
  for (int i = 0; i < root; i++) off += lens[i];
  memcpy(buffer, all + off, n);
  free(all);
  free(lens);
  return MPI_SUCCESS;
}

#define REDUCE_AS(T)                                                                  \
  do {                                                                                \
    T *o = (T *)out;                                                                  \
    const T *in = (const T *)src;                                                     \
    for (int k = 0; k < count; k++) {                                                 \
      if (op == MPI_SUM) o[k] += in[k];                                               \
      else if (op == MPI_MIN) o[k] = in[k] < o[k] ? in[k] : o[k];                     \
      else o[k] = in[k] > o[k] ? in[k] : o[k];                                        \
    }                                                                                 \
  } while (0)

static void combine(void *out, const void *src, int count, MPI_Datatype t, MPI_Op op) {
  if (op != MPI_SUM && op != MPI_MIN && op != MPI_MAX) fatal("unsupported op %d", op);
  switch (t) {
  case MPI_BYTE: REDUCE_AS(unsigned char); break;
  case MPI_CHAR: REDUCE_AS(signed char); break;
  case MPI_INT: REDUCE_AS(int); break;
  case MPI_UNSIGNED: REDUCE_AS(unsigned); break;
  case MPI_LONG: REDUCE_AS(long); break;
  case MPI_UNSIGNED_LONG: REDUCE_AS(unsigned long); break;
  case MPI_LONG_LONG: REDUCE_AS(long long); break;
  case MPI_INT64_T: REDUCE_AS(int64_t); break;
  case MPI_UINT64_T: REDUCE_AS(uint64_t); break;
  case MPI_FLOAT: REDUCE_AS(float); break;
  case MPI_DOUBLE: REDUCE_AS(double); break;
  default: fatal("unsupported datatype %d", t);
  }
}

int MPI_Allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                  MPI_Comm comm) {
  struct comm *c = commOf(comm);
  size_t n = (size_t)count * typeSize(datatype);
  const void *mine = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  uint64_t *lens = xmalloc((size_t)c->size * sizeof *lens);
  char *all = exchange(c, mine, n, lens);
  memcpy(recvbuf, all, n);
  for (int i = 1; i < c->size; i++) combine(recvbuf, all + (size_t)i * n, count, datatype, op);
  free(all);
  free(lens);
  return MPI_SUCCESS;
}

/* gatherTo fills recvbuf with every member's block of recvcount elements. */
static void gatherTo(struct comm *c, const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                     void *recvbuf, int recvcount, MPI_Datatype recvtype, int keep) {
  size_t block = (size_t)recvcount * typeSize(recvtype);
  const void *mine = (const char *)recvbuf + (size_t)c->rank * block;
  size_t n = block; /* in place: the count and type of the send side are ignored */
  if (sendbuf != MPI_IN_PLACE) {
    mine = sendbuf;
    n = (size_t)sendcount * typeSize(sendtype);
  }
  uint64_t *lens = xmalloc((size_t)c->size * sizeof *lens);
  char *all = exchange(c, mine, n, lens);
  if (keep) {
    size_t off = 0;
    for (int i = 0; i < c->size; i++) {
      if (lens[i] != block) fatal("gather: member %d sent %llu bytes, expected %zu", i, (unsigned long long)lens[i], block);
      memcpy((char *)recvbuf + (size_t)i * block, all + off, block);
      off += lens[i];
    }
  }
  free(all);
  free(lens);
}

int MPI_Gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
               int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  struct comm *c = commOf(comm);
  int atRoot = c->rank == root;
  if (!atRoot && sendbuf == MPI_IN_PLACE) fatal("MPI_Gather: MPI_IN_PLACE off the root");
  gatherTo(c, sendbuf, sendcount, sendtype, recvbuf, atRoot ? recvcount : 0,
           atRoot ? recvtype : MPI_BYTE, atRoot);
  return MPI_SUCCESS;
}

int MPI_Allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                  int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  gatherTo(commOf(comm), sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, 1);
  return MPI_SUCCESS;
}
