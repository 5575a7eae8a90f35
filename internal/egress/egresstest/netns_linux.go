package egresstest

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// netns is a network namespace joined to the host's by a veth pair whose addresses exist only
// inside the pair: a documentation address (203.0.113.0/24, TEST-NET-3) that the proxy treats
// as public, and a private one (10.201.0.0/16).
type netns struct {
	name      string
	addr, lan netip.Addr
}

func newNetns(t testing.TB) (*netns, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, err
	}
	seq := nsSeq.Add(1)
	k, err := freeSubnet()
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("abxeg%d-%d", os.Getpid(), seq)
	host, peer := fmt.Sprintf("abxh%d.%d", os.Getpid()%100000, seq), fmt.Sprintf("abxp%d.%d", os.Getpid()%100000, seq)
	n := &netns{
		name: name,
		addr: netip.AddrFrom4([4]byte{203, 0, 113, byte(4*k + 2)}),
		lan:  netip.AddrFrom4([4]byte{10, 201, byte(k), 2}),
	}
	run := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
		return nil
	}
	if err := run("netns", "add", name); err != nil {
		nsMu.Lock()
		delete(nsUsed, k)
		nsMu.Unlock()
		return nil, err
	}
	t.Cleanup(func() {
		if err := run("netns", "del", name); err != nil {
			t.Logf("remove test netns: %v", err)
		}
		nsMu.Lock()
		delete(nsUsed, k)
		nsMu.Unlock()
	})
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", name},
		{"addr", "add", fmt.Sprintf("203.0.113.%d/30", 4*k+1), "dev", host},
		{"addr", "add", fmt.Sprintf("10.201.%d.1/30", k), "dev", host},
		{"link", "set", host, "up"},
		{"-n", name, "addr", "add", n.addr.String() + "/30", "dev", peer},
		{"-n", name, "addr", "add", n.lan.String() + "/30", "dev", peer},
		{"-n", name, "link", "set", peer, "up"},
		{"-n", name, "link", "set", "lo", "up"},
	} {
		if err := run(args...); err != nil {
			return nil, err
		}
	}
	return n, nil
}

var (
	nsSeq  atomic.Int64
	nsMu   sync.Mutex
	nsUsed = map[int]bool{}
)

// freeSubnet picks a /30 of 203.0.113.0/24 that no interface of the host uses (other test
// processes may run their own outsides).
func freeSubnet() (int, error) {
	out, err := exec.Command("ip", "-o", "-4", "addr", "show").Output()
	if err != nil {
		return 0, err
	}
	nsMu.Lock()
	defer nsMu.Unlock()
	start := os.Getpid() % 63
	for i := range 63 {
		k := (start + i) % 63
		if nsUsed[k] || strings.Contains(string(out), fmt.Sprintf(" 203.0.113.%d/30", 4*k+1)) {
			continue
		}
		nsUsed[k] = true
		return k, nil
	}
	return 0, fmt.Errorf("no free /30 in 203.0.113.0/24")
}

// listen creates a listening socket inside the namespace: a socket belongs to the network
// namespace of the thread that created it, wherever it is used afterwards.
func (n *netns) listen(network, addr string) (net.Listener, error) {
	target, err := os.Open("/run/netns/" + n.name)
	if err != nil {
		return nil, err
	}
	defer target.Close()
	runtime.LockOSThread()
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	defer self.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("setns: %w", err)
	}
	ln, lerr := net.Listen(network, addr)
	if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
		// The thread stays in the test namespace; keep it locked so that it dies with the
		// goroutine instead of running other goroutines there.
		if ln != nil {
			ln.Close()
		}
		return nil, fmt.Errorf("setns back: %w", err)
	}
	runtime.UnlockOSThread()
	return ln, lerr
}
