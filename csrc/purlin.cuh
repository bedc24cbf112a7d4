/**
 * @file purlin.cuh
 * @brief The index of Purlin's kernels: what each header holds.
 *
 * A SNAC Plan (snac/plan.go) is a list of workers, each a list of steps over
 * four verbs. One kernel, purlin_run (run.cu), executes it: thread block b is
 * worker b, and a Launch (plan.cuh) passed by value carries the Plan's device
 * address, every rank's symmetric memory, the caller's buffers and the
 * reduction. Vocabulary, one concept per header:
 *
 *   plan.cuh     Ref, Step, Worker (byte-identical to snac's), Peers, Launch
 *   status.cuh   the status word a failed block leaves for the host
 *   flags.cuh    ordered loads/stores, Bound (abort flag + deadline), notify, wait
 *   packets.cuh  16-byte packets {payload, flag}: storePacket, loadPacket
 *   numeric.cuh  the 12 data types: storage, accumulation type, conversions
 *   reduce.cuh   the 6 ops as a Reducer, and reduceWords over packed words
 *   copy.cuh     block-wide copyPlain, reducePlain, movePackets
 *   epilogue.cuh an AllReduce's epilogue on whole rows of its output (residual add,
 *                RMSNorm, FP8), the Epilogue steps purlin_epilogue (run.cu) runs after
 *                purlin_run, with the same Launch
 *   run.cu       the kernel: decode steps (resolve Refs), run them, advance epochs;
 *                and purlin_epilogue
 *
 * Memory ordering, across GPUs at system scope: a Notify that publishes data
 * fences before its store when the block wrote since its last fence, a Wait
 * acquires with its load, and packets need neither (flags.cuh, packets.cuh). Every wait
 * runs under a Bound, in release builds too.
 *
 * Launch configuration: grid = Plan workers, block = kThreads (512), no
 * dynamic shared memory, the caller's stream.
 */
#pragma once

#include "plan.cuh"
#include "status.cuh"
#include "flags.cuh"
#include "packets.cuh"
#include "numeric.cuh"
#include "reduce.cuh"
#include "copy.cuh"
#include "epilogue.cuh"
