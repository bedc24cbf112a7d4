// examples/cpp/allreduce.cpp: a C++ program linking an installed Purlin.
// Two ranks in one process on the host Atom (PURLIN_ATOM=host): each rank
// sums a vector of floats across both, on its own host stream; the program
// checks every element and exits 0 when all are right.
//
//   g++ -std=c++17 allreduce.cpp $(pkg-config --cflags --libs purlin) -o allreduce
//   cmake -S . -B build -DCMAKE_PREFIX_PATH=<prefix> && cmake --build build
//   PURLIN_ATOM=host ./allreduce
#include <purlin.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                  \
  do {                                                                               \
    purlinResult_t r_ = (call);                                                      \
    if (r_ != purlinSuccess) {                                                       \
      std::fprintf(stderr, "%s: %s (%s)\n", #call, purlinGetErrorString(r_),         \
                   purlinGetLastError(nullptr));                                     \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

int main() {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1001;  // odd, so no size is special
  int version = 0;
  CHECK(purlinGetVersion(&version));

  purlinComm_t comms[kRanks];
  CHECK(purlinCommInitAll(comms, kRanks, nullptr));
  purlinStream_t streams[kRanks];
  std::vector<std::vector<float>> send(kRanks, std::vector<float>(kCount));
  std::vector<std::vector<float>> recv(kRanks, std::vector<float>(kCount, -1.0f));
  for (int r = 0; r < kRanks; r++) {
    CHECK(purlinHostStreamCreate(&streams[r]));
    for (size_t i = 0; i < kCount; i++) send[r][i] = float(r + 1) * float(i % 97);
  }

  // One thread drives both ranks, so their calls go in one group, as with NCCL.
  CHECK(purlinGroupStart());
  for (int r = 0; r < kRanks; r++)
    CHECK(purlinAllReduce(send[r].data(), recv[r].data(), kCount, purlinFloat, purlinSum, comms[r], streams[r]));
  CHECK(purlinGroupEnd());
  for (int r = 0; r < kRanks; r++) CHECK(purlinHostStreamSynchronize(streams[r]));

  size_t wrong = 0;
  for (int r = 0; r < kRanks; r++)
    for (size_t i = 0; i < kCount; i++)
      if (recv[r][i] != 3.0f * float(i % 97)) wrong++;

  for (int r = 0; r < kRanks; r++) {
    CHECK(purlinHostStreamDestroy(streams[r]));
    CHECK(purlinCommDestroy(comms[r]));
  }
  std::printf("allreduce: Purlin %d.%d.%d (NCCL ABI %d), %d ranks, %zu floats, %zu wrong: %s\n", PURLIN_MAJOR,
              PURLIN_MINOR, PURLIN_PATCH, version, kRanks, kCount, wrong, wrong == 0 ? "PASS" : "FAIL");
  return wrong == 0 ? 0 : 1;
}
