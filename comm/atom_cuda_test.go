package comm

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"purlin/atom"
	"purlin/atom/cuda"
	"purlin/atom/host"
	"purlin/config"
	"purlin/errs"
	"purlin/snac"
	"purlin/spec"
)

// fakeCUDA stands in for the CUDA Atom so selection is tested without a GPU.
type fakeCUDA struct {
	cudaFactory
	availErr error
	device   int
	current  bool
	onDevice [2]uintptr // [from, to): the addresses deviceMemory reports
}

func (f fakeCUDA) available() error            { return f.availErr }
func (f fakeCUDA) currentDevice() (int, bool)  { return f.device, f.current }
func (f fakeCUDA) deviceMemory(p uintptr) bool { return p >= f.onDevice[0] && p < f.onDevice[1] }
func (f fakeCUDA) newRank(snac.Topology, atom.Exchange, atom.Options) (atom.Rank, error) {
	return nil, errs.New(errs.ErrUnsupported, "fake")
}

// withFakeCUDA installs fake (nil: a build without CUDA) for one test.
// PURLIN_ATOM is passed as an argument, never through config.Reload:
// rendezvous servers of other tests read the settings concurrently.
func withFakeCUDA(t *testing.T, fake *fakeCUDA) {
	saved := cudaAtom
	if fake == nil {
		cudaAtom = nil
	} else {
		cudaAtom = *fake
	}
	t.Cleanup(func() { cudaAtom = saved })
}

func TestSelectAtom(t *testing.T) {
	usable := &fakeCUDA{device: 1, current: true}
	broken := &fakeCUDA{availErr: errs.New(errs.ErrUnsupported, "cuda: no CUDA device")}
	for _, tc := range []struct {
		name    string
		choice  string
		fake    *fakeCUDA
		onGPU   bool
		want    string
		wantErr error
	}{
		{"auto with a current device", "auto", usable, true, "cuda", nil},
		{"auto without a device for the communicator", "auto", usable, false, "host", nil},
		{"auto, CUDA unusable", "auto", broken, true, "host", nil},
		{"auto, build without CUDA", "auto", nil, true, "host", nil},
		{"unset is auto", "", usable, true, "cuda", nil},
		{"host forced", "host", usable, true, "host", nil},
		{"cuda forced without a device for the communicator", "cuda", usable, false, "cuda", nil},
		{"cuda forced, unusable", "cuda", broken, true, "", errs.ErrUnsupported},
		{"cuda forced, build without CUDA", "cuda", nil, true, "", errs.ErrUnsupported},
		{"unknown choice", "gpu", usable, true, "", errs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withFakeCUDA(t, tc.fake)
			f, err := selectAtom(tc.choice, 0, 1, tc.onGPU)
			if tc.wantErr != nil {
				require.True(t, errors.Is(err, tc.wantErr), "got %v", err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, f.name())
		})
	}
}

func TestCallerDevice(t *testing.T) {
	for _, tc := range []struct {
		name      string
		choice    string
		fake      *fakeCUDA
		wantDev   int
		wantOnGPU bool
	}{
		{"current device wins over the fallback", "auto", &fakeCUDA{device: 3, current: true}, 3, true},
		{"no current context: device 0, as NCCL's cudaGetDevice", "auto", &fakeCUDA{device: 3}, 0, true},
		{"no current context, CUDA unusable: the fallback", "auto", &fakeCUDA{availErr: errs.New(errs.ErrUnsupported, "no GPU")}, 7, false},
		{"PURLIN_ATOM=host ignores the device", "host", &fakeCUDA{device: 3, current: true}, 7, false},
		{"build without CUDA", "auto", nil, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withFakeCUDA(t, tc.fake)
			dev, onGPU := callerDevice(tc.choice, 7)
			require.Equal(t, tc.wantDev, dev)
			require.Equal(t, tc.wantOnGPU, onGPU)
		})
	}
}

// A communicator whose creating thread has a current device takes it and
// the CUDA Atom (here a fake that fails to start, so the error names it),
// and so does one made on a thread with none, as in NCCL (device 0); where
// CUDA is unusable it keeps the caller's device argument and the host Atom.
func TestInitRankRecordsCallerDevice(t *testing.T) {
	if config.Get().Atom != "auto" {
		t.Skip("PURLIN_ATOM is set")
	}
	for _, current := range []bool{true, false} {
		withFakeCUDA(t, &fakeCUDA{device: 1, current: current})
		id, err := GetUniqueID()
		require.NoError(t, err)
		_, err = InitRank(1, id, 0, testConfig(), 0)
		require.Error(t, err)
		require.Contains(t, err.Error(), "cuda Atom")
	}

	cudaAtom = fakeCUDA{availErr: errs.New(errs.ErrUnsupported, "no GPU")}
	comms := startComms(t, 2, testConfig())
	for r, c := range comms {
		require.Equal(t, "host", c.AtomName())
		require.Equal(t, r, c.Device(), "no usable GPU: the caller's device argument")
	}
}

// A communicator on the host Atom beside a usable GPU (PURLIN_ATOM=host)
// refuses, with an error and staying usable, buffers in device memory,
// which its threads would fault on, and records no call for C to issue
// unchecked; another buffer still goes through.
func TestHostAtomRefusesDeviceMemory(t *testing.T) {
	host, dev := newBuffer(t, 4096), newBuffer(t, 4096)
	withFakeCUDA(t, &fakeCUDA{onDevice: [2]uintptr{dev.addr(), dev.addr() + 4096}})
	cfg := testConfig()
	cfg.Atom = "host"
	c := startComms(t, 1, cfg)[0]
	require.Equal(t, "host", c.AtomName())
	call := func(send, recv uintptr) *spec.Call {
		return &spec.Call{Coll: spec.AllReduce, Send: send, Recv: recv, Count: 64, Type: spec.Float32}
	}
	for _, bad := range []*spec.Call{call(dev.addr(), host.addr()), call(host.addr(), dev.addr()+256)} {
		err := c.Collective(bad, 0)
		require.True(t, errors.Is(err, errs.ErrInvalidArgument), "got %v", err)
		require.Contains(t, err.Error(), "is device memory")
	}
	require.NoError(t, c.Collective(call(host.addr(), host.addr()+2048), 0))
	require.NoError(t, c.Synchronize())
	n, _ := c.Replay([]spec.Call{*call(host.addr(), host.addr()+2048)}, 0, unsafe.Pointer(&[64]byte{}), 64)
	require.Zero(t, n, "a record that would skip the check")

	withFakeCUDA(t, &fakeCUDA{availErr: errs.New(errs.ErrUnsupported, "no GPU"), onDevice: [2]uintptr{dev.addr(), dev.addr() + 4096}})
	plain := startComms(t, 1, testConfig())[0]
	require.NoError(t, plain.Collective(call(dev.addr(), host.addr()), 0), "no usable GPU: nothing is checked")
	require.NoError(t, plain.Synchronize())
}

func TestCUDATopology(t *testing.T) {
	got := cudaFactory{}.topology(4, 2, Config{})
	require.Equal(t, cuda.Topology(4, 2), got, "the Atom's topology, no overrides")
	small := cudaFactory{}.topology(2, 0, testConfig())
	require.Equal(t, testConfig().StageHalf, small.StageHalf)
	require.Equal(t, testConfig().Workers, small.Workers)
	require.Equal(t, testConfig().PacketMax, small.PacketMax)
}

// Without a usable CUDA Atom, MemAlloc hands out host memory and MemFree
// refuses pointers it never gave.
func TestMemAllocWithoutCUDA(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("CUDA is usable here: MemAlloc gives device memory")
	}
	p, err := MemAlloc(100)
	require.NoError(t, err)
	b := (*[100]byte)(p)
	b[99] = 7 // host memory: writable from Go
	require.NoError(t, MemFree(p))
	require.Error(t, MemFree(p))
}

// A group's merged point-to-point Plan is the same *Plan on every call with
// the same parts (the CUDA Atom uploads each Plan pointer it has not seen,
// and may not during graph capture), and a different one for other parts.
func TestMergedPlanIsStable(t *testing.T) {
	p := newPlanner(cuda.Topology(2, 0))
	send := spec.Call{Coll: spec.SendRecv, Send: 64, Recv: 64, Count: 16, Type: spec.Float32, Rank: 0, NRanks: 2, Peer: 1, IsSend: true}
	recv := send
	recv.IsSend = false
	a, err := p.get(&send, false)
	require.NoError(t, err)
	b, err := p.get(&recv, false)
	require.NoError(t, err)
	m1, err := p.merge([]*snac.Plan{a, b})
	require.NoError(t, err)
	m2, err := p.merge([]*snac.Plan{a, b})
	require.NoError(t, err)
	require.Same(t, m1, m2)
	m3, err := p.merge([]*snac.Plan{b, a})
	require.NoError(t, err)
	require.NotSame(t, m1, m3, "order matters: buffer i is part i's")
	for i := 0; i < 2*mergeCacheMax; i++ { // the cache stays bounded
		c := send
		c.Count = uint64(17 + i)
		x, err := p.get(&c, false)
		require.NoError(t, err)
		_, err = p.merge([]*snac.Plan{x, b})
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(p.merged), mergeCacheMax)
}

// narrowingCUDA stands in for a CUDA Atom whose ranks, once they know their
// peers, need Plans of fewer workers (ranks sharing a GPU: cuda.Rank's
// Topology); its ranks are host ranks.
type narrowingCUDA struct{ fakeCUDA }

type narrowedRank struct {
	atom.Rank
	topo snac.Topology
}

func (n narrowedRank) Topology() snac.Topology { return n.topo }

func (narrowingCUDA) newRank(topo snac.Topology, ex atom.Exchange, opts atom.Options) (atom.Rank, error) {
	ht := host.Topology(topo.NRanks, topo.Rank)
	rk, err := host.NewRank(ht, ex, opts)
	if err != nil {
		return nil, err
	}
	ht.Workers = 1
	return narrowedRank{rk, ht}, nil
}

// A communicator builds its Plans for the topology its rank reports (one
// worker), not the one the rank was made with (two).
func TestPlansFollowTheRanksTopology(t *testing.T) {
	if config.Get().Atom != "auto" {
		t.Skip("PURLIN_ATOM is set")
	}
	saved := cudaAtom
	cudaAtom = narrowingCUDA{fakeCUDA{device: 0, current: true}}
	t.Cleanup(func() { cudaAtom = saved })
	comms := startComms(t, 2, testConfig()) // 2 workers
	for r, c := range comms {
		require.Equal(t, 1, c.plans.topo.Workers, "rank %d", r)
		plan, err := c.plans.get(&spec.Call{Coll: spec.AllReduce, Type: spec.Float32, Op: spec.Op{Kind: spec.Sum},
			Count: 1 << 20, Rank: r, NRanks: 2, Send: 1 << 20, Recv: 1 << 30}, false)
		require.NoError(t, err)
		require.Len(t, plan.Workers, 1, "rank %d", r)
	}
}

// A datapath that does not start names itself, keeping its cause's code.
func TestAtomStartError(t *testing.T) {
	cause := errs.New(errs.ErrCuda, "cuDeviceGet 1: CUDA_ERROR_INVALID_DEVICE")
	for _, name := range []string{"cuda", "host"} {
		err := (&Comm{rank: 1, device: 1}).atomStartError(name, cause)
		require.True(t, errors.Is(err, errs.ErrCuda), "the cause's code stays: %v", err)
		require.Contains(t, err.Error(), "CommInitRank rank 1: "+name+" Atom: ")
		require.Contains(t, err.Error(), "CUDA_ERROR_INVALID_DEVICE")
	}
}
