package main

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/atom/cuda"
	"purlin/config"
)

func rows(t *testing.T, args ...string) [][]string {
	t.Helper()
	o, err := parse(args)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, report(&out, o))
	var r [][]string
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0][0] >= '0' && f[0][0] <= '9' {
			r = append(r, f) // a size's row; not a comment or a step
		}
	}
	return r
}

// TestRegimesAndBlocks: the smallest AllReduce is one block of packets, the
// largest a staged regime on every block; rows follow -from, -to, -factor.
func TestRegimesAndBlocks(t *testing.T) {
	for _, v := range []string{"PURLIN_PACKET_BYTES", "PURLIN_STAGE_BYTES", "PURLIN_P2P_BYTES", "PURLIN_CHUNK_BYTES", "PURLIN_MAX_CTAS", "NCCL_MAX_CTAS"} {
		t.Setenv(v, "")
	}
	config.Reload()
	t.Cleanup(func() { config.Reload() })
	r := rows(t, "-from", "16", "-to", "1G", "-factor", "4", "allreduce")
	require.Len(t, r, 14) // 16 B, 64 B, ... 1 GiB
	require.Equal(t, []string{"16", "packet", "1", "0", "2"}, r[0])
	last := r[len(r)-1]
	require.Equal(t, "1073741824", last[0])
	require.NotEqual(t, "packet", last[1])
	require.Equal(t, strconv.Itoa(cuda.DefaultWorkers), last[2])

	// Per-rank counts: an AllGather of 8 bytes over 4 ranks is 2 bytes a rank
	// in int8: block 0 sends packets to each of 3 peers and copies from
	// each; a second block makes the local copy beside them.
	r = rows(t, "-ranks", "4", "-type", "int8", "-from", "8", "-to", "8", "allgather")
	require.Equal(t, [][]string{{"8", "packet", "2", "0", "6"}}, r)

	// A column block's matrix has purlin-perf's rows (64 at 2 KiB: rows
	// of 16 bytes a rank), which its steps stride over.
	o, err := parse([]string{"-from", "2K", "-to", "2K", "-steps", "reducescattercolumns"})
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, report(&out, o))
	require.Contains(t, out.String(), "\n          2048  packet ")
	require.Contains(t, out.String(), "Pitch:32}")

	// -steps lists block 0's steps under its row.
	o, err = parse([]string{"-from", "8", "-to", "8", "-steps", "sendrecv"})
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, report(&out, o))
	require.Contains(t, out.String(), "    wait ")
	require.Contains(t, out.String(), "    copy ")

	// A ring's chunks repeat as a loop, which -steps names.
	o, err = parse([]string{"-from", "1G", "-to", "1G", "-steps", "allgather"})
	require.NoError(t, err)
	out.Reset()
	require.NoError(t, report(&out, o))
	require.Regexp(t, `\n    repeat  the next \d+ steps \d+ times, flags \d+ and buffers \d+ bytes further each time\n`, out.String())

	// With the copy engine, a large AllReduce's producers are copies and
	// its reducers blocks.
	t.Setenv("PURLIN_COPY_ENGINE", "16777216")
	config.Reload()
	r = rows(t, "-from", "256M", "-to", "256M", "allreduce")
	require.Equal(t, []string{"268435456", "ring", "32", "2"}, r[0][:4])
}

// TestPrograms: with -nodes, a size's row gives its chunks, phases and
// scratch, and -steps each phase: an AllReduce of 16 MiB on 2 nodes of 2
// runs in 4 network chunks of 4 MiB; an integer mean sums on the rail, then
// divides over every rank on the node.
func TestPrograms(t *testing.T) {
	t.Setenv("PURLIN_NET_CHUNK", "")
	config.Reload()
	t.Cleanup(func() { config.Reload() })
	r := rows(t, "-nodes", "2", "-ranks", "4", "-from", "1M", "-to", "16M", "-factor", "16", "allreduce")
	require.Equal(t, [][]string{{"1048576", "1", "3", "0"}, {"16777216", "4", "3", "0"}}, r)

	o, err := parse([]string{"-nodes", "2", "-ranks", "16", "-rank", "9", "-type", "int32", "-op", "avg", "-from", "4K", "-to", "4K", "-steps", "allreduce"})
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, report(&out, o))
	require.Contains(t, out.String(), "rail  AllReduce count 1024 sum, send+0 -> scratch+0")
	require.Contains(t, out.String(), "node  AllReduce count 1024 avg over 16, scratch+0 -> recv+0")
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{
		{}, {"allreduce", "allgather"}, {"nosuch"}, {"-type", "float7", "allreduce"},
		{"-ranks", "9", "allreduce"}, {"-rank", "2", "allreduce"}, {"-from", "0", "allreduce"},
		{"-to", "1X", "allreduce"}, {"-factor", "1", "allreduce"}, {"-op", "mean", "allreduce"},
		{"-nodes", "3", "-ranks", "4", "allreduce"}, {"-nodes", "2", "-ranks", "18", "allreduce"}, {"alltoallmatrix"},
	} {
		_, err := parse(args)
		require.Error(t, err, "%q", args)
	}
}
