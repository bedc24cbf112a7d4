package rendezvous

import (
	"net"
	"strings"

	"purlin/config"
	"purlin/errs"
)

// listenAddr is where a new rendezvous server listens (host:port, port 0
// for any): PURLIN_BOOTSTRAP_ADDR when set; else the first IPv4 address of
// the first interface PURLIN_SOCKET_IFNAME (or NCCL_SOCKET_IFNAME) admits;
// else loopback, which serves only ranks of this host.
func listenAddr(s config.Settings) (string, error) {
	if a := s.BootstrapAddr; a != "" {
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(strings.Trim(a, "[]"), "0")
		}
		return a, nil
	}
	if s.SocketIfname == "" {
		return "127.0.0.1:0", nil
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return "", errs.New(errs.ErrSystem, "GetUniqueID: listing network interfaces: %v", err)
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || !ifnameAdmits(s.SocketIfname, ifc.Name) {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return net.JoinHostPort(ipn.IP.String(), "0"), nil
			}
		}
	}
	return "", errs.New(errs.ErrSystem, "GetUniqueID: no interface that is up with an IPv4 address matches socket interface setting %q", s.SocketIfname)
}

// ifnameAdmits reports whether interface name passes spec, NCCL's
// NCCL_SOCKET_IFNAME form: comma-separated prefixes ("eth,ib"), exact
// names after a leading '=' ("=eth0"), and a leading '^' to exclude the
// listed ones instead ("^docker,lo").
func ifnameAdmits(spec, name string) bool {
	exclude := strings.HasPrefix(spec, "^")
	spec = strings.TrimPrefix(spec, "^")
	exact := strings.HasPrefix(spec, "=")
	spec = strings.TrimPrefix(spec, "=")
	listed := false
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		if p != "" && (name == p || !exact && strings.HasPrefix(name, p)) {
			listed = true
			break
		}
	}
	return listed != exclude
}
