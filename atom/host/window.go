package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"purlin/atom"
	"purlin/errs"
)

// UserWindow is one rank's view of a symmetric window: every rank's
// registered buffer as an address in this process. Ranks of this process
// are reached through their own pointers; ranks of other processes through
// a MAP_SHARED mapping of their buffer's memfd (see AllocShared), kept
// until Close. A direct Plan (snac.SpacePeerRecv) pushes into peers'
// outputs through Peers.
type UserWindow struct {
	peers []uintptr // by rank; immutable
	maps  [][]byte  // mappings of other processes' memory, unmapped by Close
	// drain waits for the rank's launched work, which may still push
	// through the mappings (a direct Plan), before Close unmaps them.
	drain func() error
}

// Peers returns every rank's buffer as this process addresses it, by rank.
func (w *UserWindow) Peers() []uintptr { return append([]uintptr(nil), w.peers...) }

// Close unmaps the other processes' buffers, once the rank's work that may
// still write through them is done. It is local: peers' own memory is
// untouched.
func (w *UserWindow) Close() error {
	if len(w.maps) > 0 && w.drain != nil {
		w.drain() // its error is the work's, reported by the rank
	}
	var all error
	for _, m := range w.maps {
		if err := unix.Munmap(m); err != nil {
			all = errors.Join(all, errs.New(errs.ErrSystem, "host window: munmap peer buffer: %v", err))
		}
	}
	w.maps = nil
	return all
}

// windowRecord is what each rank tells the others about its buffer.
const windowRecordBytes = 8 * 4

// MapWindow is collective over ex: every rank passes its buffer (equal
// sizes, checked by the caller) and gets every rank's buffer mapped here
// (see mapUserWindow).
func (r *Rank) MapWindow(ex atom.Exchange, ptr uintptr, size uint64) (atom.Window, error) {
	w, err := mapUserWindow(ex, ptr, size)
	if err != nil {
		return nil, err
	}
	w.drain = r.Synchronize
	return w, nil
}

// mapUserWindow maps every rank's buffer here.
// When all ranks share this process the pointers are used as they are;
// otherwise every buffer must come from AllocShared (purlinMemAlloc), and
// a rank whose buffer does not makes every rank fail with an error naming
// it. Every rank returns an error when any rank failed, so no rank keeps a
// window its peers do not have.
func mapUserWindow(ex atom.Exchange, ptr uintptr, size uint64) (*UserWindow, error) {
	fd, offset, allocSize, shareable, localErr := sharedRegion(ptr, size)
	if fd >= 0 {
		defer unix.Close(fd)
	}
	msg := make([]byte, windowRecordBytes+1)
	binary.LittleEndian.PutUint64(msg[0:], uint64(os.Getpid()))
	binary.LittleEndian.PutUint64(msg[8:], uint64(ptr))
	binary.LittleEndian.PutUint64(msg[16:], offset)
	binary.LittleEndian.PutUint64(msg[24:], allocSize)
	if shareable && localErr == nil {
		msg[32] = 1
	}
	if localErr != nil {
		msg = append(msg, strings.TrimPrefix(localErr.Error(), "purlin: ")...)
	}
	all, err := ex.AllGather(msg)
	if err != nil {
		return nil, fmt.Errorf("host window rank %d: exchanging buffers: %w", ex.Rank(), err)
	}
	onePID := true
	for q, m := range all {
		if len(m) < windowRecordBytes+1 {
			return nil, errs.New(errs.ErrRemote, "host window: rank %d sent %d bytes", q, len(m))
		}
		if len(m) > windowRecordBytes+1 && localErr == nil {
			return nil, errs.New(errs.ErrInvalidUsage, "host window: rank %d failed: %s", q, m[windowRecordBytes+1:])
		}
		onePID = onePID && binary.LittleEndian.Uint64(m) == uint64(os.Getpid())
	}
	if localErr != nil {
		return nil, localErr
	}
	w := &UserWindow{peers: make([]uintptr, len(all))}
	if onePID {
		for q, m := range all {
			w.peers[q] = uintptr(binary.LittleEndian.Uint64(m[8:]))
		}
		return w, nil
	}
	for q, m := range all {
		if m[32] == 0 {
			return nil, errs.New(errs.ErrInvalidArgument,
				"host window: rank %d's buffer %#x was not allocated by purlinMemAlloc; the host Atom shares only those across processes",
				q, binary.LittleEndian.Uint64(m[8:]))
		}
	}
	fds, err := ex.AllGatherFD(fd)
	if err != nil {
		return nil, fmt.Errorf("host window rank %d: exchanging descriptors: %w", ex.Rank(), err)
	}
	for q, m := range all {
		if err == nil {
			err = w.mapPeer(q, fds[q], m)
		}
		unix.Close(fds[q])
	}
	if err = atom.Agree(ex, "host window", err); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// mapPeer sets rank q's address: its own pointer when q lives in this
// process, else a mapping of the memfd q sent.
func (w *UserWindow) mapPeer(q, fd int, rec []byte) error {
	ptr := uintptr(binary.LittleEndian.Uint64(rec[8:]))
	if binary.LittleEndian.Uint64(rec) == uint64(os.Getpid()) {
		w.peers[q] = ptr
		return nil
	}
	offset, allocSize := binary.LittleEndian.Uint64(rec[16:]), binary.LittleEndian.Uint64(rec[24:])
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || uint64(st.Size) < allocSize {
		return errs.New(errs.ErrRemote, "host window: rank %d's memfd holds %d bytes, want %d (%v)", q, st.Size, allocSize, err)
	}
	mem, err := unix.Mmap(fd, 0, int(allocSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return errs.New(errs.ErrSystem, "host window: mmap rank %d's buffer (%d bytes): %v", q, allocSize, err)
	}
	w.maps = append(w.maps, mem)
	w.peers[q] = uintptr(unsafe.Pointer(unsafe.SliceData(mem))) + uintptr(offset)
	return nil
}
