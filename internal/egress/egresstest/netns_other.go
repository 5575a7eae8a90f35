//go:build !linux

package egresstest

import (
	"errors"
	"net"
	"net/netip"
	"testing"
)

type netns struct{ addr, lan netip.Addr }

func newNetns(testing.TB) (*netns, error) { return nil, errors.New("network namespaces need Linux") }

func (n *netns) listen(network, addr string) (net.Listener, error) {
	return nil, errors.New("network namespaces need Linux")
}
