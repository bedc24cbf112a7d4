package spec_test

import (
	"testing"

	"purlin/spec"
)

// FuzzValidate: Validate never panics on any call, and a call it accepts
// has every part (InPart, OutPart, as laid out by its strides) inside the
// extents it reports, so a Plan built from it reads and writes only there.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{byte(spec.AllGatherColumns), 2, 0, 8, 0, 4, 0, 0, 0})
	f.Add([]byte{byte(spec.ReduceScatterColumns), 3, 1, 6, 0, 3, 0, 0, 0})
	f.Add([]byte{byte(spec.AllToAllMatrix), 3, 2, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{byte(spec.AllToAllV), 2, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 7 {
			return
		}
		n := 1 + int(b[1])%4
		c := spec.Call{Coll: spec.Collective(b[0] % byte(spec.NumCollectives+1)), NRanks: n, Rank: int(b[2]) % n,
			Count: uint64(b[3]) | uint64(b[4])<<8, Rows: uint64(b[5]), Type: spec.DataType(b[6] % 13),
			Root: int(b[2]>>4) % n, Peer: int(b[2]>>6) % n, Send: 1 << 20, Recv: 1 << 30, Op: spec.Op{Kind: spec.Sum}}
		rest := b[7:]
		next := func() uint64 {
			if len(rest) == 0 {
				return 0
			}
			v := uint64(rest[0])
			rest = rest[1:]
			return v
		}
		list := func(k int) []uint64 {
			v := make([]uint64, k)
			for i := range v {
				v[i] = next()
			}
			return v
		}
		k := n
		if c.Coll < spec.NumCollectives && c.Coll.Matrix() {
			k = n * n
		}
		c.Counts, c.Displs = list(k), list(k)
		c.SendCounts, c.SendDispls, c.RecvCounts, c.RecvDispls = list(n), list(n), list(n), list(n)
		if len(rest) > 0 && rest[0]&1 == 1 {
			c.Counts = nil // a NULL list must be refused, not dereferenced
		}
		if c.Validate() != nil || c.Coll == spec.SendRecv {
			return
		}
		in, out := c.Extents()
		check := func(what string, off, length uint64, st spec.Stride, extent uint64) {
			if length == 0 {
				return
			}
			end := off + length
			if st.Row > 0 {
				end = off + (length/st.Row-1)*st.Pitch + st.Row
			}
			if end > extent {
				t.Fatalf("%s: %s part [%d,%d) past the extent %d", &c, what, off, end, extent)
			}
		}
		for q := range n {
			if c.Produces(c.Rank) && (c.Consumes(q) || c.Coll.Reduces()) {
				off, length := c.InPart(c.Rank, q)
				check("input", off, length, c.InStride(), in)
			}
			if c.Consumes(c.Rank) && c.Produces(q) {
				off, length := c.OutPart(c.Rank, q)
				if c.Coll.Reduces() && q != c.Rank {
					continue // a reduction lands only in this rank's own part
				}
				check("output", off, length, c.OutStride(), out)
			}
		}
	})
}
