package host

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"purlin/errs"
)

// Packets are 16 bytes: an 8-byte payload word, then a flag word
// uint64(uint32(check))<<32 | uint64(uint32(epoch+Delta)). The host has no
// 16-byte atomic store, so a writer stores the payload, then the flag word;
// a reader waits for the flag word, then loads the payload. Both words are
// atomic, so the flag's store publishes the payload.

// packetFlag is the flag word of this call's packets for a step.
func packetFlag(check uint64, target int64) uint64 {
	return uint64(uint32(check))<<32 | uint64(uint32(target))
}

// writePackets stores data as packets into words (two per packet); the
// last packet may carry fewer than 8 bytes, zero-padded.
func writePackets(words []uint64, data []byte, flag uint64) {
	for i := 0; len(data) > 0; i++ {
		var payload uint64
		if len(data) >= 8 {
			payload = binary.LittleEndian.Uint64(data)
			data = data[8:]
		} else {
			var tail [8]byte
			copy(tail[:], data)
			payload = binary.LittleEndian.Uint64(tail[:])
			data = nil
		}
		atomic.StoreUint64(&words[2*i], payload)
		atomic.StoreUint64(&words[2*i+1], flag)
	}
}

// readPackets waits for each packet of words, which rank src writes, to
// carry this call's flag and copies its payload into dst. A packet of this
// call with another check means the ranks disagree on the call. owner names
// the buffer for messages.
func (x *worker) readPackets(dst []byte, words []uint64, flag uint64, src, owner int, off uint64) error {
	for i := 0; len(dst) > 0; i++ {
		fw := &words[2*i+1]
		var b backoff
		for uint32(atomic.LoadUint64(fw)) != uint32(flag) {
			if err := b.pause(x.r, src, func() string {
				return fmt.Sprintf("packet at byte %d of rank %d's packet buffer (from rank %d) to carry %#x, holds %#x",
					off+16*uint64(i), owner, src, uint32(flag), atomic.LoadUint64(fw))
			}); err != nil {
				return err
			}
		}
		if got := atomic.LoadUint64(fw); got>>32 != flag>>32 {
			return errs.New(errs.ErrMismatch, "%s: packet at byte %d of rank %d's packet buffer carries check %#x, this rank's call has %#x",
				errs.Disagree, off+16*uint64(i), owner, got>>32, flag>>32)
		}
		var payload [8]byte
		binary.LittleEndian.PutUint64(payload[:], atomic.LoadUint64(&words[2*i]))
		n := copy(dst, payload[:])
		dst = dst[n:]
	}
	return nil
}
