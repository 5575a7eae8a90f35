package readiness

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/plan"
)

// AttestCommand is argv[1] of the agentbox binary when it runs in a probe box as the attester.
// It takes no arguments and refuses any.
const AttestCommand = "readiness-attest"

// SchemaVersion is the version of the challenge and the attestation.
const SchemaVersion = 1

// Files of the probe's run directory (bound read-only at plan.RunDir in the box).
const (
	// ChallengeFile is what the prober asks the attester to check.
	ChallengeFile = "readiness-challenge.json"
)

// Challenge is what the prober set up on the host for the attester to try to reach: it lives
// in the probe's run directory, which the box sees read-only at plan.RunDir.
type Challenge struct {
	Version int    `json:"version"`
	Nonce   string `json:"nonce"`
	// TCPPort is a port the prober listens on at host 127.0.0.1.
	TCPPort int `json:"tcpPort"`
	// Abstract is the name (without the leading NUL) of a host abstract unix socket.
	Abstract string `json:"abstract"`
	// HostSockets are host pathname sockets: the prober's own listener beside the run directory
	// and the host's session bus, Wayland and system bus sockets (whether or not they exist).
	HostSockets []string `json:"hostSockets"`
	// Secret is the host path of a canary file the prober wrote in ~/.ssh.
	Secret string `json:"secret"`
	// HostPids are host pids (the prober and its parent) that must not be visible in the box.
	HostPids []int `json:"hostPids"`
	// Workspace is the probe's workspace, where a write must succeed.
	Workspace string `json:"workspace"`
}

// Check is one fact the attester tried itself: OK when the property holds, Detail what it saw
// (required: a check without evidence fails).
type Check struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Attestation is what the attester prints as one JSON line. Every field is required: a field
// that is missing (null) fails the probe just like a false one.
type Attestation struct {
	Version int    `json:"version"`
	Nonce   string `json:"nonce"`
	// Namespaces are the inode numbers of the attester's namespaces (/proc/self/ns/*).
	Namespaces map[string]uint64 `json:"namespaces"`
	LoopbackUp *bool             `json:"loopbackUp"`
	// Interfaces are the interfaces of /proc/net/dev; RoutesOut the routes (IPv4 and IPv6)
	// through any interface but lo.
	Interfaces   []string `json:"interfaces"`
	RoutesOut    []string `json:"routesOut"`
	HostTCP      *Check   `json:"hostTCP"`
	HostAbstract *Check   `json:"hostAbstract"`
	// X11 covers /tmp/.X11-unix and the abstract @/tmp/.X11-unix/X* sockets; SessionSockets the
	// challenge's pathname sockets; GUIEnv DISPLAY, WAYLAND_DISPLAY and DBUS_SESSION_BUS_ADDRESS.
	X11            *Check `json:"x11"`
	SessionSockets *Check `json:"sessionSockets"`
	GUIEnv         *Check `json:"guiEnv"`
	LandlockABI    *int   `json:"landlockABI"`
	// LandlockEnforced: a write the mounts allow but the grants do not fails with EACCES.
	LandlockEnforced *Check `json:"landlockEnforced"`
	// WorkspaceWritable: a write inside the grants works (so that the denial above is Landlock's).
	WorkspaceWritable *Check `json:"workspaceWritable"`
	SeccompMode       *int   `json:"seccompMode"`
	// SeccompDenied maps a system call to the errno the attester got from it.
	SeccompDenied map[string]string `json:"seccompDenied"`
	NoNewPrivs    *int              `json:"noNewPrivs"`
	// Caps are the capability sets of /proc/self/status (CapEff, CapPrm, CapAmb, CapInh, CapBnd).
	Caps             map[string]string `json:"caps"`
	SecretUnreadable *Check            `json:"secretUnreadable"`
	HostPidsHidden   *Check            `json:"hostPidsHidden"`
	InitUnsignalable *Check            `json:"initUnsignalable"`
	// Grandchild is the pid, in the box, of a double-forked setsid grandchild the attester
	// left running: the prober checks host-side that the box's end takes it along.
	Grandchild *int `json:"grandchild"`
}

// DecodeAttestation decodes one attestation; unknown fields are refused.
func DecodeAttestation(b []byte) (*Attestation, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var a Attestation
	if err := dec.Decode(&a); err != nil {
		return nil, fmt.Errorf("decode attestation: %w", err)
	}
	return &a, nil
}

// Requirements is what a probe must prove, derived from the plan it ran and the configuration.
type Requirements struct {
	// Nonce is the challenge's nonce, echoed by the attester.
	Nonce string
	// MinLandlockABI is the plan's minimum, raised to 6 when egress: allow is configured
	// (abstract-socket and signal scoping stand in for the network namespace).
	MinLandlockABI int
	// Namespaces are the namespace kinds that must be the box's own.
	Namespaces []string
	// OwnNetwork is true when the plan gives the box its own network namespace.
	OwnNetwork bool
	// SeccompDenied maps the system calls that must be denied to the errno they must fail with.
	SeccompDenied map[string]string
}

// CapSets are the capability sets that must be empty.
var CapSets = []string{"CapEff", "CapPrm", "CapAmb", "CapInh", "CapBnd"}

// RequirementsFor derives what a probe of p must prove; egressAllow says whether the
// configuration allows egress for launches (which the probe's own deny plan does not show).
func RequirementsFor(p *plan.Plan, nonce string, egressAllow bool) Requirements {
	r := Requirements{
		Nonce:          nonce,
		MinLandlockABI: max(p.Landlock.MinABI, 2),
		Namespaces:     []string{"user", "mnt", "pid", "ipc", "uts"},
		OwnNetwork:     p.Network.Egress == plan.EgressDeny,
		SeccompDenied:  map[string]string{"ptrace": "EPERM", "bpf": "EPERM", "io_uring_setup": "ENOSYS"},
	}
	if r.OwnNetwork {
		r.Namespaces = append(r.Namespaces, "net")
	}
	if egressAllow {
		r.MinLandlockABI = max(r.MinLandlockABI, 6)
	}
	return r
}

// Observed is what the prober saw host-side, which the box cannot tell about itself.
type Observed struct {
	// BoxNamespaces are the box's namespace ids as the shim recorded them from /proc/<box>/ns
	// right after the start; HostNamespaces the prober's own.
	BoxNamespaces  map[string]uint64
	HostNamespaces map[string]uint64
	// ListenerHits counts connections the prober's host listeners accepted (any is a breach).
	ListenerHits int
	// ListenerForeign counts connections to those listeners known not to be the box's (another
	// uid, or a TCP peer closed before it could be attributed): not a breach, since any local
	// user can read the listeners' names and ports from /proc and connect.
	ListenerForeign int
	// GrandchildSeen: the attester's grandchild was found host-side in the box's pid namespace
	// before teardown; GrandchildGone: after teardown, nothing of that pid namespace remains.
	GrandchildSeen, GrandchildGone bool
	GrandchildDetail               string
	// Settled is the shim's verdict on the box's end; ExitCode the attester's exit code.
	Settled  bool
	ExitCode *int
}

// Verify checks the attestation (nil when none arrived) and the host's observations against
// the requirements. It returns every fact in a fixed order and the first failure, or nil.
func Verify(a *Attestation, o Observed, r Requirements) ([]api.Fact, *Error) {
	var facts []api.Fact
	var first *Error
	add := func(name string, ok bool, detail string, reason Reason) {
		facts = append(facts, api.Fact{Name: name, OK: ok, Detail: detail})
		if !ok && first == nil {
			first = &Error{Reason: reason, Detail: name + ": " + detail}
		}
	}
	att := func(name string, ok bool, detail string) { add(name, ok, detail, ReasonAttestationFailed) }
	if a == nil {
		a = &Attestation{}
		att("attestation", false, "no attestation from the box")
	} else {
		att("attestation", a.Version == SchemaVersion && a.Nonce != "" && a.Nonce == r.Nonce,
			fmt.Sprintf("version %d, nonce %s", a.Version, shortNonce(a.Nonce, r.Nonce)))
	}
	for _, k := range r.Namespaces {
		child, ok := a.Namespaces[k]
		box, host := o.BoxNamespaces[k], o.HostNamespaces[k]
		switch {
		case !ok:
			att("namespaces."+k, false, "missing")
		case box == 0 || host == 0:
			att("namespaces."+k, false, "host-side namespace ids unknown")
		default:
			att("namespaces."+k, child == box && child != host,
				fmt.Sprintf("box %d, created for the probe %d, host %d", child, box, host))
		}
	}
	if r.OwnNetwork {
		att("network.loopback_up", a.LoopbackUp != nil && *a.LoopbackUp, boolDetail(a.LoopbackUp, "lo is up", "lo is down"))
		add("network.only_lo", a.Interfaces != nil && slices.Equal(a.Interfaces, []string{"lo"}),
			listDetail(a.Interfaces, "interfaces"), ReasonNetworkSetupFailed)
		att("network.no_route_out", a.RoutesOut != nil && len(a.RoutesOut) == 0, listDetail(a.RoutesOut, "routes out"))
		att("network.host_tcp_unreachable", checkOK(a.HostTCP), checkDetail(a.HostTCP))
		att("network.host_abstract_unreachable", checkOK(a.HostAbstract), checkDetail(a.HostAbstract))
	}
	att("network.host_listeners_untouched", o.ListenerHits == 0, fmt.Sprintf("%d connection(s) reached the prober's host listeners (%d from other users or unattributable, not counted)", o.ListenerHits, o.ListenerForeign))
	att("gui.x11_unreachable", checkOK(a.X11), checkDetail(a.X11))
	att("gui.session_sockets_unreachable", checkOK(a.SessionSockets), checkDetail(a.SessionSockets))
	att("gui.environment_unset", checkOK(a.GUIEnv), checkDetail(a.GUIEnv))
	switch {
	case a.LandlockABI == nil:
		att("landlock.abi", false, "missing")
	case *a.LandlockABI < 1:
		add("landlock.abi", false, "Landlock is not available in the box", ReasonLandlockUnavailable)
	default:
		add("landlock.abi", *a.LandlockABI >= r.MinLandlockABI,
			fmt.Sprintf("ABI %d, need %d", *a.LandlockABI, r.MinLandlockABI), ReasonLandlockABITooOld)
	}
	att("landlock.enforced", checkOK(a.LandlockEnforced), checkDetail(a.LandlockEnforced))
	att("landlock.workspace_writable", checkOK(a.WorkspaceWritable), checkDetail(a.WorkspaceWritable))
	if a.SeccompMode == nil {
		att("seccomp.mode", false, "missing")
	} else {
		add("seccomp.mode", *a.SeccompMode == 2, fmt.Sprintf("Seccomp: %d, need 2 (filter)", *a.SeccompMode), ReasonSeccompUnavailable)
	}
	for _, sc := range sortedKeys(r.SeccompDenied) {
		got, ok := a.SeccompDenied[sc]
		if !ok {
			att("seccomp.denies_"+sc, false, "missing")
			continue
		}
		att("seccomp.denies_"+sc, got == r.SeccompDenied[sc], fmt.Sprintf("%s, need %s", got, r.SeccompDenied[sc]))
	}
	if a.NoNewPrivs == nil {
		att("no_new_privs", false, "missing")
	} else {
		att("no_new_privs", *a.NoNewPrivs == 1, fmt.Sprintf("NoNewPrivs: %d", *a.NoNewPrivs))
	}
	for _, set := range CapSets {
		v, ok := a.Caps[set]
		if !ok {
			att("caps."+set, false, "missing")
			continue
		}
		att("caps."+set, strings.Trim(v, "0") == "" && v != "", set+": "+v)
	}
	att("secrets.ssh_canary_unreadable", checkOK(a.SecretUnreadable), checkDetail(a.SecretUnreadable))
	att("pids.host_hidden", checkOK(a.HostPidsHidden), checkDetail(a.HostPidsHidden))
	att("pids.init_unsignalable", checkOK(a.InitUnsignalable), checkDetail(a.InitUnsignalable))
	if a.Grandchild == nil {
		att("teardown.grandchild_started", false, "missing")
	} else {
		att("teardown.grandchild_started", *a.Grandchild > 1, fmt.Sprintf("grandchild pid %d in the box", *a.Grandchild))
	}
	att("teardown.grandchild_seen", o.GrandchildSeen, "before teardown: "+o.GrandchildDetail)
	code := "no exit status"
	if o.ExitCode != nil {
		code = fmt.Sprintf("exit %d", *o.ExitCode)
	}
	att("teardown.exit", o.ExitCode != nil && *o.ExitCode == 0, code)
	add("teardown.settled", o.Settled, "the shim verified that no process of the box remains", ReasonUnsettled)
	add("teardown.grandchild_gone", o.GrandchildGone, "after teardown, host-side scan of the box's pid namespace", ReasonUnsettled)
	return facts, first
}

// checkOK requires the property to hold and the attester to say what it saw.
func checkOK(c *Check) bool { return c != nil && c.OK && c.Detail != "" }

func checkDetail(c *Check) string {
	if c == nil {
		return "missing"
	}
	return c.Detail
}

func boolDetail(b *bool, yes, no string) string {
	switch {
	case b == nil:
		return "missing"
	case *b:
		return yes
	}
	return no
}

func listDetail(l []string, what string) string {
	if l == nil {
		return "missing"
	}
	if len(l) == 0 {
		return "no " + what
	}
	return what + ": " + strings.Join(l, ", ")
}

func shortNonce(got, want string) string {
	if got == want && got != "" {
		return "matches"
	}
	return fmt.Sprintf("%q does not match the challenge", got)
}

func sortedKeys(m map[string]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	slices.Sort(k)
	return k
}
