package comm

import (
	"sync"
	"sync/atomic"
	"time"

	"purlin/atom"
	"purlin/comm/rendezvous"
	"purlin/config"
	"purlin/errs"
	"purlin/snac"
)

// Config is a communicator's settings (ncclConfig_t's fields that Purlin
// honours, plus topology overrides). The zero value is not the default:
// start from DefaultConfig.
type Config struct {
	// Blocking: when false, init returns errs.ErrInProgress at once and
	// finishes in the background; AsyncError reports its outcome.
	Blocking bool
	// Timeout bounds every wait of the communicator; 0 means PURLIN_TIMEOUT.
	Timeout time.Duration
	// Atom, when set, replaces PURLIN_ATOM: "auto", "host" or "cuda".
	Atom string
	// Topology overrides; 0 means the Atom's default. Every rank must pass
	// the same values (tests use small ones to reach every SNAC regime).
	Workers   int
	StageHalf uint64
	P2PHalf   uint64
	PacketMax uint64
	ChunkMax  uint64
	// CopyEngine, when above 0, replaces PURLIN_COPY_ENGINE (the shortest
	// transfer on the copy engine), and CopyEngineChunk its chunk bound.
	CopyEngine      uint64
	CopyEngineChunk uint64
	// Nodes, when above 0, is how many nodes of consecutive ranks the
	// communicator spans (1: one node whatever the hosts), instead of
	// PURLIN_NODES or one node per host.
	Nodes int
	// NetChunk, when above 0, replaces PURLIN_NET_CHUNK: the bytes of one
	// chunk of a pipelined call across nodes (the most of a uint64: never
	// pipelined).
	NetChunk uint64
	// Network carries calls between nodes; nil: the build's default.
	Network NetworkFactory
}

// DefaultConfig is NCCL's default: blocking, settings from PURLIN_*.
func DefaultConfig() Config { return Config{Blocking: true} }

// atom is the communicator's PURLIN_ATOM: cfg.Atom, else the setting.
func (cfg Config) atom() string {
	if cfg.Atom != "" {
		return cfg.Atom
	}
	return config.Get().Atom
}

func (cfg Config) timeout() time.Duration {
	if cfg.Timeout > 0 {
		return cfg.Timeout
	}
	return config.Get().Timeout
}

// Life cycle of a communicator.
const (
	stateInit      int32 = iota // init deferred to GroupEnd or running in the background
	stateReady                  // usable
	stateFailed                 // init failed: only Destroy/Abort are legal
	stateFinalized              // Finalize done: only Destroy/Abort are legal
	stateDestroyed              // freed; the handle is dead
)

// Comm is one rank's communicator. All methods are safe from any
// goroutine; collectives on one Comm must be issued in the same order on
// every rank, as with NCCL. A Comm must not be copied.
type Comm struct {
	handle uintptr // registry handle; never 0
	cfg    Config
	device int
	onGPU  bool // the creating thread had device current (see callerDevice)
	rank   int  // fixed at creation, except for Split placeholders (set before ready)
	nranks int

	state    atomic.Int32
	initDone chan struct{} // closed when init finished, well or not
	initErr  error         // set before initDone is closed
	cancel   chan struct{} // closed by Abort: ends an init still waiting for peers
	deferred atomic.Bool   // init waits for GroupEnd

	// Set by init, immutable afterwards.
	boot     *rendezvous.Bootstrap
	dp       atom.Rank
	atomName string
	plans    *planner
	// deviceMemory is set on the host Atom beside a usable GPU (deviceMemoryCheck).
	deviceMemory func(uintptr) bool

	asyncErr atomic.Pointer[error] // first failure of the communicator (abort, failed init) or of its work
	redops   redOpTable
	lastErr  atomic.Pointer[string]
	shrinks  atomic.Uint64 // Shrink calls so far (names each shrink's mailbox message)

	// direct lists this rank's live symmetric windows for the launch path
	// (direct.go); directMu orders its writers.
	direct   atomic.Pointer[[]directWindow]
	directMu sync.Mutex
}

func newComm(cfg Config, rank, nranks, device int) (*Comm, error) {
	c := &Comm{cfg: cfg, rank: rank, nranks: nranks, device: device, initDone: make(chan struct{}), cancel: make(chan struct{})}
	if err := register(c); err != nil {
		return nil, err
	}
	return c, nil
}

// init joins the rendezvous id names and sets up the datapath. It runs
// once, synchronously, in the background, or at GroupEnd.
func (c *Comm) init(id UniqueID) (err error) {
	defer func() {
		c.initErr = err
		if err != nil {
			c.state.Store(stateFailed)
			c.noteAsync(err)
		} else {
			c.state.Store(stateReady)
		}
		close(c.initDone)
	}()
	boot, err := rendezvous.Connect(&id, c.rank, c.nranks, c.device, c.cfg.timeout(), c.cancel)
	if err != nil {
		return err
	}
	virtual := c.cfg.Nodes
	if virtual == 0 {
		virtual = config.Get().Nodes
	}
	nodes, err := nodesOf(boot.Peers(), virtual)
	if err == nil && nodes.Count > 1 {
		err = c.initNodes(boot, nodes)
	}
	if err == nil && nodes.Count > 1 {
		return nil
	}
	if err == nil && c.nranks > snac.MaxRanks {
		err = errs.New(errs.ErrInvalidArgument, "CommInitRank: %d ranks on one node; Purlin serves at most %d (one NVLink server)", c.nranks, snac.MaxRanks)
	}
	if err != nil {
		boot.Close(false)
		return err
	}
	factory, err := selectAtom(c.cfg.atom(), c.rank, c.device, c.onGPU)
	if err != nil {
		boot.Close(false)
		return err
	}
	topo := factory.topology(c.nranks, c.rank, c.cfg)
	dp, err := factory.newRank(topo, boot, atom.Options{TimeoutNanos: int64(c.cfg.timeout()), Device: c.device})
	if err != nil {
		boot.Close(false)
		return c.atomStartError(factory.name(), err)
	}
	if n, ok := dp.(narrowed); ok {
		topo = n.Topology()
	}
	c.boot, c.dp, c.atomName = boot, dp, factory.name()
	c.deviceMemory = deviceMemoryCheck(factory)
	c.plans = newPlanner(topo)
	// A rank gone is an error only for work that still needs it: the
	// datapath fails the waits that what the rank wrote does not satisfy.
	drop := func(peer int, err error) {
		config.Warnf("comm %#x rank %d: %v: work that still waits for it fails", c.handle, c.rank, err)
		dp.PeerGone(peer, err)
	}
	boot.SetOnDrop(drop)
	config.Infof("Purlin %s (NCCL %d) comm %#x rank %d of %d, device %d, %s Atom", Version, NCCLVersion, c.handle, c.rank, c.nranks, c.device, c.atomName)
	return nil
}

// narrowed is a rank whose Atom, once it knows its peers, needs Plans built
// for a narrower topology than the one it was made with (the CUDA Atom:
// fewer blocks where ranks share a GPU).
type narrowed interface{ Topology() snac.Topology }

// noteAsync records the communicator's first asynchronous failure and
// reports whether err is it.
func (c *Comm) noteAsync(err error) bool {
	return c.asyncErr.CompareAndSwap(nil, &err)
}

// usable returns nil when collectives may be issued on c.
func (c *Comm) usable(what string) error {
	switch c.state.Load() {
	case stateReady:
		return nil
	case stateInit:
		return errs.New(errs.ErrInvalidUsage, "%s: communicator %#x has not finished its init (poll CommGetAsyncError, or end the group)", what, c.handle)
	case stateFailed:
		return errs.New(errs.ErrInvalidUsage, "%s: communicator %#x failed its init: %v", what, c.handle, c.initErr)
	case stateFinalized:
		return errs.New(errs.ErrInvalidUsage, "%s: communicator %#x was finalized", what, c.handle)
	}
	return errs.New(errs.ErrInvalidUsage, "%s: communicator %#x was destroyed", what, c.handle)
}

// Handle is c's registry handle: the opaque non-zero integer C sees.
func (c *Comm) Handle() uintptr { return c.handle }

// Rank is c's rank; Count its number of ranks; Device its device ordinal.
func (c *Comm) Rank() int   { return c.rank }
func (c *Comm) Count() int  { return c.nranks }
func (c *Comm) Device() int { return c.device }

// AtomName is the datapath serving c ("host", "cuda"); "" before init.
func (c *Comm) AtomName() string {
	if c.state.Load() == stateInit {
		return ""
	}
	return c.atomName
}

// AsyncError reports c's state as NCCL's ncclCommGetAsyncError does: nil
// when healthy, errs.ErrInProgress while a non-blocking init runs, else the
// first error of the communicator or of its launched work.
func (c *Comm) AsyncError() error {
	switch c.state.Load() {
	case stateInit:
		return errs.ErrInProgress
	case stateDestroyed:
		return errs.New(errs.ErrInvalidUsage, "CommGetAsyncError: communicator %#x was destroyed", c.handle)
	}
	if e := c.asyncErr.Load(); e != nil {
		return *e
	}
	if c.dp != nil {
		if err := c.dp.AsyncError(); err != nil {
			if c.noteAsync(err) { // said once, where it is first seen: programs that abort on it may not say it
				config.Warnf("comm %#x rank %d: asynchronous error: %v", c.handle, c.rank, err)
			}
			return *c.asyncErr.Load()
		}
	}
	return nil
}

// WaitInit blocks until c's init finished (bounded by its timeout) and returns its outcome.
func (c *Comm) WaitInit() error {
	select {
	case <-c.initDone:
		return c.initErr
	case <-time.After(c.cfg.timeout() + time.Second):
		return errs.New(errs.ErrTimeout, "communicator %#x: init did not finish within the timeout", c.handle)
	}
}
