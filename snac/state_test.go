package snac

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// PacketSource inverts PacketOff and P2PPacketOff at every payload offset
// of every source's window.
func TestPacketSourceInvertsWindows(t *testing.T) {
	for _, topo := range []Topology{
		{NRanks: 2, PacketMax: 1 << 10},
		{NRanks: 3, PacketMax: 13},
		{NRanks: 8, PacketMax: 8 << 10},
	} {
		t.Run(fmt.Sprint(topo.NRanks, "ranks"), func(t *testing.T) {
			for src := range topo.NRanks {
				for _, off := range []uint64{0, 8, roundUp(topo.PacketMax, 8) - 8} {
					require.Equal(t, src, topo.PacketSource(topo.PacketOff(src)+2*off), "collective window, payload byte %d", off)
					require.Equal(t, src, topo.PacketSource(topo.P2PPacketOff(src)+2*off), "p2p window, payload byte %d", off)
				}
			}
		})
	}
	require.Equal(t, -1, Topology{NRanks: 2}.PacketSource(0), "no packet windows")
}

// SlotSource and SlotKind invert FlagSlot's src and kind.
func TestSlotSourceInvertsFlagSlot(t *testing.T) {
	for _, ch := range []uint16{Collective, SendChannel(3), RecvChannel(MaxRanks - 1)} {
		for kind := range numFlagKinds {
			for src := range MaxRanks {
				for _, w := range []int{0, 1, MaxWorkers - 1} {
					require.Equal(t, src, SlotSource(FlagSlot(ch, kind, src, w)), "channel %d kind %d worker %d", ch, kind, w)
					require.Equal(t, kind, SlotKind(FlagSlot(ch, kind, src, w)), "channel %d kind %d worker %d", ch, kind, w)
				}
			}
		}
	}
}
