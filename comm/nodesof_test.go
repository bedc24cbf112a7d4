package comm

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/comm/rendezvous"
	"purlin/snac"
)

func TestNodesOfHosts(t *testing.T) {
	peers := func(hosts ...string) []rendezvous.PeerInfo {
		p := make([]rendezvous.PeerInfo, len(hosts))
		for r, h := range hosts {
			p[r] = rendezvous.PeerInfo{Rank: r, NRanks: len(hosts), Host: h}
		}
		return p
	}
	for _, c := range []struct {
		hosts   []string
		virtual int
		want    snac.Nodes
		err     string
	}{
		{[]string{"a", "a", "a"}, 0, snac.Nodes{Count: 1, Local: 3}, ""},
		{[]string{"a", "a", "b", "b"}, 0, snac.Nodes{Count: 2, Local: 2}, ""},
		{[]string{"a", "b", "c"}, 0, snac.Nodes{Count: 3, Local: 1}, ""},
		{[]string{"a", "a", "a", "a"}, 2, snac.Nodes{Count: 2, Local: 2}, ""},
		{[]string{"a", "b", "a", "b"}, 1, snac.Nodes{Count: 1, Local: 4}, ""}, // one node, as told
		{[]string{"a", "b", "a", "b"}, 0, snac.Nodes{}, "not consecutive"},
		{[]string{"a", "a", "b"}, 0, snac.Nodes{}, "as many ranks on every node"},
		{[]string{"a", "a", "a"}, 2, snac.Nodes{}, "cannot form 2 nodes"},
	} {
		got, err := nodesOf(peers(c.hosts...), c.virtual)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, "%v", c.hosts)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%v", c.hosts)
	}
}

func TestColocated(t *testing.T) {
	at := func(where ...string) []rendezvous.PeerInfo { // "host/pid" a rank
		p := make([]rendezvous.PeerInfo, len(where))
		for r, w := range where {
			host, pid, _ := strings.Cut(w, "/")
			p[r] = rendezvous.PeerInfo{Rank: r, NRanks: len(where), Host: host, Pid: len(pid)}
		}
		return p
	}
	for _, c := range []struct {
		where []string
		rank  int
		want  bool
	}{
		{[]string{"a/1", "a/1"}, 1, true},               // one process drives both GPUs
		{[]string{"a/1", "a/22"}, 0, false},             // a process a GPU
		{[]string{"a/1", "b/1"}, 0, false},              // the same pid on another host
		{[]string{"a/1", "a/1", "b/1", "b/1"}, 2, true}, // a process a node
		{[]string{"a/1", "a/1", "b/1", "b/22"}, 3, false},
		{[]string{"a/1"}, 0, false},
	} {
		require.Equal(t, c.want, colocated(at(c.where...), c.rank), "%v rank %d", c.where, c.rank)
	}
}
