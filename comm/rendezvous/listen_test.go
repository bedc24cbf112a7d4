package rendezvous

import (
	"testing"

	"github.com/stretchr/testify/require"

	"purlin/config"
)

func TestIfnameAdmitsAsNCCL(t *testing.T) {
	for _, c := range []struct {
		spec, name string
		want       bool
	}{
		{"eth", "eth0", true},
		{"eth", "eth", true},
		{"eth", "ib0", false},
		{"eth,ib", "ib1", true},
		{"=eth0", "eth0", true},
		{"=eth0", "eth01", false},
		{"^docker,lo", "lo", false},
		{"^docker,lo", "docker0", false},
		{"^docker,lo", "eth0", true},
		{"^=eth0", "eth0", false},
		{"^=eth0", "eth01", true},
	} {
		require.Equal(t, c.want, ifnameAdmits(c.spec, c.name), "%q admits %q", c.spec, c.name)
	}
}

func TestListenAddr(t *testing.T) {
	for _, c := range []struct {
		s    config.Settings
		want string
	}{
		{config.Settings{}, "127.0.0.1:0"},
		{config.Settings{BootstrapAddr: "10.1.2.3"}, "10.1.2.3:0"},
		{config.Settings{BootstrapAddr: "10.1.2.3:29500", SocketIfname: "eth"}, "10.1.2.3:29500"},
		{config.Settings{BootstrapAddr: "[fe80::1]"}, "[fe80::1]:0"},
		{config.Settings{SocketIfname: "lo"}, "127.0.0.1:0"}, // loopback's IPv4 address
	} {
		got, err := listenAddr(c.s)
		require.NoError(t, err)
		require.Equal(t, c.want, got, "%+v", c.s)
	}
	_, err := listenAddr(config.Settings{SocketIfname: "=no-such-interface"})
	require.ErrorContains(t, err, "no interface")
}
