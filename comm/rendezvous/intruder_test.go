package rendezvous

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The attacks of a local user who knows only what every user sees: the
// rendezvous' address and the abstract socket names in /proc/net/unix, not
// the unique id. Each says what the intruder got back; the tests check it
// learned nothing and the real ranks were not hurt.

// intruderHello is the hello frame an intruder can make: a PeerInfo for
// rank of nranks, preceded by a guess of what the server wants (guess: any
// bytes it learned, or made up).
func intruderHello(guess []byte, rank, nranks int) []byte {
	p := append([]byte(nil), guess...)
	for _, v := range []int{rank, nranks, 4242, 0} {
		p = binary.LittleEndian.AppendUint32(p, uint32(int32(v)))
	}
	p = binary.LittleEndian.AppendUint16(p, 8)
	p = append(p, "intruder"...)
	return append([]byte{frameHello, 0, 0, 0, 0}, p...)
}

// intrude dials addr, sends frame (after reading whatever the server says
// first), and returns every byte the server sent until it closed the
// connection or wait passed.
func intrude(t *testing.T, addr string, frame []byte, wait time.Duration) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil // the rendezvous closed: every real rank arrived
	}
	defer c.Close()
	binary.LittleEndian.PutUint32(frame[1:5], uint32(len(frame)-5))
	c.SetDeadline(time.Now().Add(wait))
	var got bytes.Buffer
	first := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _ := c.Read(first); n > 0 {
		got.Write(first[:n])
	}
	c.SetDeadline(time.Now().Add(wait))
	c.Write(frame)
	io.Copy(&got, c)
	return got.Bytes()
}

// leakedMagic is a secret a reply gave away (the rendezvous used to quote
// its magic in the text refusing a wrong one), as the hello bytes that
// present it; nil when none.
var leakedMagicRE = regexp.MustCompile(`rendezvous is 0x([0-9a-f]+)`)

func leakedMagic(reply []byte) []byte {
	m := leakedMagicRE.FindSubmatch(reply)
	if m == nil {
		return nil
	}
	v, err := strconv.ParseUint(string(m[1]), 16, 64)
	if err != nil {
		return nil
	}
	return binary.LittleEndian.AppendUint64(nil, v)
}

// attack probes the rendezvous with a made-up hello, then, with anything it
// learned, claims rank of nranks; it returns every byte the server sent.
func attack(t *testing.T, addr string, rank, nranks int) []byte {
	probe := intrude(t, addr, intruderHello(make([]byte, 72), rank, nranks), time.Second)
	guess := leakedMagic(probe)
	if guess == nil {
		guess = make([]byte, 64) // a made-up nonce and proof
	}
	return append(probe, intrude(t, addr, intruderHello(guess, rank, nranks), time.Second)...)
}

// idSecretHex are hex spellings of the id's secret bytes an intruder might
// find: whole, and its first 8 bytes as a little-endian number.
func idSecretHex(id *UniqueID) []string {
	return []string{
		fmt.Sprintf("%x", id[24:56]),
		fmt.Sprintf("%x", binary.LittleEndian.Uint64(id[24:32])),
		fmt.Sprintf("%016x", binary.LittleEndian.Uint64(id[24:32])),
	}
}

// assertLearnedNothing checks an intruder's bytes: at most the handshake's
// challenge (a random nonce), never a table, a refusal text or the secret.
func assertLearnedNothing(t *testing.T, id *UniqueID, got []byte) {
	t.Helper()
	for _, h := range idSecretHex(id) {
		assert.NotContains(t, string(got), h, "the intruder saw the secret")
	}
	for len(got) >= 5 {
		kind, n := got[0], int(binary.LittleEndian.Uint32(got[1:5]))
		assert.Equal(t, frameChallenge, kind, "an intruder was sent frame %d: %q", kind, got)
		got = got[min(len(got), 5+n):]
	}
}

// startJob starts ranks 0..n-1 of a new id; wait returns their bootstraps.
func startJob(t *testing.T, id *UniqueID, n int, timeout time.Duration) (wait func() []*Bootstrap) {
	boots := make([]*Bootstrap, n)
	errList := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { boots[r], errList[r] = Connect(id, r, n, r, timeout, nil) })
	}
	return func() []*Bootstrap {
		wg.Wait()
		for r, err := range errList {
			require.NoError(t, err, "real rank %d", r)
		}
		t.Cleanup(func() {
			for _, b := range boots {
				b.Close(true)
			}
		})
		return boots
	}
}

// jobWorks runs an AllGather and an AllGatherFD on boots and checks both.
func jobWorks(t *testing.T, boots []*Bootstrap) {
	t.Helper()
	n := len(boots)
	var wg sync.WaitGroup
	inodes := make([]uint64, n)
	for r, b := range boots {
		fd, err := unix.MemfdCreate(fmt.Sprintf("real-%d", r), 0)
		require.NoError(t, err)
		defer unix.Close(fd)
		var st unix.Stat_t
		require.NoError(t, unix.Fstat(fd, &st))
		inodes[r] = st.Ino
		wg.Go(func() {
			vals, err := b.AllGather([]byte{byte(r)})
			if assert.NoError(t, err) {
				for q, v := range vals {
					assert.Equal(t, []byte{byte(q)}, v)
				}
			}
			fds, err := b.AllGatherFD(fd)
			if !assert.NoError(t, err) {
				return
			}
			for q, f := range fds {
				var st unix.Stat_t
				assert.NoError(t, unix.Fstat(f, &st))
				assert.Equal(t, inodes[q], st.Ino, "rank %d got a descriptor for rank %d that rank %d did not send", r, q, q)
				unix.Close(f)
			}
		})
	}
	wg.Wait()
}

// purlinSockets returns the abstract socket names of /proc/net/unix that
// start with @purlin.
func purlinSockets(t *testing.T) []string {
	f, err := os.Open("/proc/net/unix")
	require.NoError(t, err)
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if name := fields[len(fields)-1]; strings.HasPrefix(name, "@purlin") {
			names = append(names, name)
		}
	}
	return names
}

// An intruder that probes the rendezvous and claims a rank, before and
// while the real ranks arrive, gets nothing but a random challenge (no
// refusal text, no secret, no table), and the real job works.
func TestIntruderCannotJoin(t *testing.T) {
	for _, tc := range []struct {
		name         string
		rank, nranks int
	}{
		{"rank 1 of 2", 1, 2},
		{"rank 0 of 8, to lock the real ranks out", 0, 8},
		{"rank 0 of 2147483647, to exhaust memory", 0, 2147483647},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := GetUniqueID()
			require.NoError(t, err)
			addr, _, err := id.decode()
			require.NoError(t, err)
			assertLearnedNothing(t, &id, attack(t, addr.String(), tc.rank, tc.nranks))
			wait := startJob(t, &id, 2, 10*time.Second)
			assertLearnedNothing(t, &id, attack(t, addr.String(), tc.rank, tc.nranks))
			jobWorks(t, wait())
		})
	}
}

// The mailboxes' names, which every local user reads in /proc/net/unix,
// tell nothing of the secret; messages forged to them (a descriptor posing
// as a rank's) are dropped, and the real ranks exchange their own.
func TestIntruderMailbox(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	boots := startJob(t, &id, 2, 10*time.Second)()
	var names []string
	for _, name := range purlinSockets(t) {
		for _, h := range idSecretHex(&id) {
			assert.NotContains(t, name, h, "a socket name shows the secret")
		}
		names = append(names, name)
	}
	require.NotEmpty(t, names)
	evil, err := unix.MemfdCreate("intruder", 0)
	require.NoError(t, err)
	defer unix.Close(evil)
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
	require.NoError(t, err)
	defer unix.Close(sock)
	sent := 0
	for _, name := range names {
		for src := range 2 {
			for _, tail := range [][]byte{nil, make([]byte, 32)} { // a guess at any trailer
				msg := binary.LittleEndian.AppendUint32(nil, mailFD)
				msg = binary.LittleEndian.AppendUint32(msg, uint32(src))
				msg = binary.LittleEndian.AppendUint64(msg, 0)
				msg = append(msg, tail...)
				if unix.Sendmsg(sock, msg, unix.UnixRights(evil), &unix.SockaddrUnix{Name: name}, unix.MSG_DONTWAIT) == nil {
					sent++
				}
			}
		}
	}
	require.NotZero(t, sent, "the intruder reached no mailbox")
	jobWorks(t, boots)
}

// Frames that claim 64 MiB from connections that never authenticated are
// refused at their header: nothing is allocated for them and the server
// closes them at once.
func TestUnauthenticatedFramesAllocateNothing(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	addr, _, err := id.decode()
	require.NoError(t, err)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var wg sync.WaitGroup
	closed := make([]bool, 12)
	for i := range closed {
		wg.Go(func() {
			c, err := net.Dial("tcp", addr.String())
			if !assert.NoError(t, err) {
				return
			}
			defer c.Close()
			hdr := []byte{frameHello, 0, 0, 0, 0}
			binary.LittleEndian.PutUint32(hdr[1:], 64<<20)
			c.Write(hdr)
			c.Write(make([]byte, 64<<10)) // a start of the claimed payload
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err = io.Copy(io.Discard, c)
			closed[i] = err == nil || !isTimeout(err)
		})
	}
	wg.Wait()
	runtime.ReadMemStats(&after)
	for i, c := range closed {
		assert.True(t, c, "connection %d was not closed by the server", i)
	}
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(32<<20), "bytes allocated while 12 unauthenticated peers each claimed a 64 MiB frame")
	jobWorks(t, startJob(t, &id, 2, 10*time.Second)())
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Connections that never finish a handshake are limited: 100 idle ones
// hold at most maxHandshakes goroutines of the server, the oldest closed
// when new ones come, so the real ranks still get in, soon.
func TestIdleConnectionsAreBounded(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	addr, _, err := id.decode()
	require.NoError(t, err)
	before := runtime.NumGoroutine()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 100 {
		c, err := net.Dial("tcp", addr.String())
		require.NoError(t, err)
		conns = append(conns, c)
	}
	time.Sleep(300 * time.Millisecond)
	assert.LessOrEqual(t, runtime.NumGoroutine()-before, 16+8, "goroutines held by 100 idle unauthenticated connections")
	start := time.Now()
	jobWorks(t, startJob(t, &id, 2, 30*time.Second)())
	took := time.Since(start)
	t.Logf("the real ranks got in after %v behind 100 idle connections", took)
	assert.Less(t, took, 8*time.Second)
}

// A rank asked to join a job of more ranks than any may have is refused
// with a clear error, and the real ranks still get in.
func TestHelloRankBound(t *testing.T) {
	id, err := GetUniqueID()
	require.NoError(t, err)
	_, err = Connect(&id, 0, 2147483647, 0, 2*time.Second, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "at most")
	jobWorks(t, startJob(t, &id, 2, 10*time.Second)())
}

// Real jobs succeed while intruders keep attacking them every way above at
// once: probing hellos claiming ranks, frames claiming 64 MiB, idle
// connections, and descriptors forged to every mailbox.
func TestJobSucceedsUnderAttack(t *testing.T) {
	const jobs, n = 6, 4
	var mu sync.Mutex
	tried := map[string]int{}
	count := func(kind string) { mu.Lock(); tried[kind]++; mu.Unlock() }
	for j := range jobs {
		id, err := GetUniqueID()
		require.NoError(t, err)
		addr, _, err := id.decode()
		require.NoError(t, err)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		attacker := func(kind string, once func()) {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					once()
					count(kind)
				}
			})
		}
		attacker("hello", func() {
			assertLearnedNothing(t, &id, attack(t, addr.String(), j%n, []int{n, 8, 2147483647}[j%3]))
		})
		attacker("big frame", func() {
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				return
			}
			c.Write([]byte{frameGather, 0, 0, 0, 4})
			c.SetReadDeadline(time.Now().Add(time.Second))
			got, _ := io.ReadAll(c)
			c.Close()
			assertLearnedNothing(t, &id, got)
		})
		attacker("idle connection", func() {
			c, err := net.Dial("tcp", addr.String())
			if err != nil {
				time.Sleep(10 * time.Millisecond)
				return
			}
			time.Sleep(50 * time.Millisecond)
			c.Close()
		})
		attacker("forged mail", func() {
			sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
			if err != nil {
				return
			}
			defer unix.Close(sock)
			for _, name := range purlinSockets(t) {
				msg := binary.LittleEndian.AppendUint32(nil, mailFD)
				msg = binary.LittleEndian.AppendUint32(msg, uint32(j%n))
				msg = binary.LittleEndian.AppendUint64(msg, 0)
				msg = append(msg, make([]byte, 32)...)
				unix.Sendmsg(sock, msg, unix.UnixRights(sock), &unix.SockaddrUnix{Name: name}, unix.MSG_DONTWAIT)
			}
			time.Sleep(time.Millisecond)
		})
		time.Sleep(50 * time.Millisecond) // the intruders are first
		jobWorks(t, startJob(t, &id, n, 20*time.Second)())
		close(stop)
		wg.Wait()
	}
	t.Logf("%d jobs of %d ranks succeeded under %v attacks", jobs, n, tried)
}
