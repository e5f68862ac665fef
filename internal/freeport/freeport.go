// Package freeport picks a TCP port for a server that a child process
// binds a moment later.
//
// The usual way, listening on port 0 and closing, hands out a port from
// the kernel's ephemeral range: the same range every outgoing connection
// takes its local port from. Between the pick and the child's bind, any
// connection (the picker's own to a database it just started, say) can
// take the port, and the child fails with "address already in use". Pick
// takes the port from below that range instead, where only another
// listener can take it. Nor does Pick hand out a port twice in a process:
// two picks made before either child binds (a server's TCP and HTTP
// ports, say) would otherwise both find the same port free. Nor, on unix,
// one that another process running Pick holds (reserve): a server killed
// and started again on its port leaves it free for a while.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port Pick hands out: well above the ports of
// common services.
const lowest = 20000

// tries bounds the ports Pick tries below the ephemeral range before it
// falls back to one from the kernel.
const tries = 64

// handed holds the ports Pick handed out in this process.
var handed = struct {
	sync.Mutex
	ports map[int]bool
}{ports: make(map[int]bool)}

// Pick returns a TCP port on host that was free a moment ago and that no
// earlier Pick of this process returned: below the ephemeral range when
// there is room (at least 1,000 ports) between lowest and its start, else
// one the kernel picks.
func Pick(host string) (int, error) { return pick(host, ephemeralStart()) }

// pick is Pick with the ephemeral range starting at start.
func pick(host string, start int) (int, error) {
	handed.Lock()
	defer handed.Unlock()
	if start-lowest >= 1000 {
		for range tries {
			p := lowest + rand.IntN(start-lowest)
			if !handed.ports[p] && free(host, p) && reserve(p) {
				handed.ports[p] = true
				return p, nil
			}
		}
	}
	for range tries {
		p, err := kernelPort(host)
		if err != nil {
			return 0, err
		}
		if !handed.ports[p] {
			handed.ports[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("pick a free port on %s: the kernel gave only ports handed out before", host)
}

// kernelPort returns a port the kernel picks from its ephemeral range.
func kernelPort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("pick a free port on %s: %w", host, err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Addr returns host:port with a port from Pick.
func Addr(host string) (string, error) {
	p, err := Pick(host)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

func free(host string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ephemeralStart returns the first port of the kernel's ephemeral range:
// Linux's setting, else 32768 (Linux's default; BSDs, macOS and Windows
// start higher).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 {
		return 32768
	}
	return n
}
