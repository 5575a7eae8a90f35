package readiness_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/readiness"
)

const nonce = "00112233445566778899aabbccddeeff"

func ptr[T any](v T) *T { return &v }

// validAttestation is what a correct box attests, with the host observations and requirements
// that go with it.
func validAttestation() (*readiness.Attestation, readiness.Observed, readiness.Requirements) {
	box := map[string]uint64{"cgroup": 101, "ipc": 102, "mnt": 103, "net": 104, "pid": 105, "user": 106, "uts": 107}
	host := map[string]uint64{"cgroup": 1, "ipc": 2, "mnt": 3, "net": 4, "pid": 5, "user": 6, "uts": 7}
	ok := func(d string) *readiness.Check { return &readiness.Check{OK: true, Detail: d} }
	a := &readiness.Attestation{
		Version: readiness.SchemaVersion, Nonce: nonce, Namespaces: box,
		LoopbackUp: ptr(true), Interfaces: []string{"lo"}, RoutesOut: []string{},
		HostTCP: ok("ECONNREFUSED"), HostAbstract: ok("ECONNREFUSED"), X11: ok("none"), SessionSockets: ok("ENOENT"),
		GUIEnv: ok("unset"), LandlockABI: ptr(7), LandlockEnforced: ok("EACCES"), WorkspaceWritable: ok("ok"),
		SeccompMode: ptr(2), SeccompDenied: map[string]string{"ptrace": "EPERM", "bpf": "EPERM", "io_uring_setup": "ENOSYS"},
		NoNewPrivs: ptr(1),
		Caps: map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapAmb": "0000000000000000",
			"CapInh": "0000000000000000", "CapBnd": "0000000000000000"},
		SecretUnreadable: ok("ENOENT"), HostPidsHidden: ok("NSpid 3"), InitUnsignalable: ok("EPERM"), Grandchild: ptr(9),
	}
	o := readiness.Observed{BoxNamespaces: box, HostNamespaces: host, GrandchildSeen: true, GrandchildGone: true,
		Settled: true, ExitCode: ptr(0)}
	p, err := plan.Build(plan.Input{ID: "x", Program: "/usr/bin/agentbox", Workspace: "/w", Home: "/home/u", RunDir: "/r"})
	if err != nil {
		panic(err)
	}
	return a, o, readiness.RequirementsFor(p, nonce, false)
}

func TestVerifyAcceptsAValidAttestation(t *testing.T) {
	a, o, r := validAttestation()
	facts, err := readiness.Verify(a, o, r)
	if err != nil {
		t.Fatalf("Verify = %v", err)
	}
	for _, f := range facts {
		if !f.OK {
			t.Errorf("fact %s not ok: %s", f.Name, f.Detail)
		}
	}
}

// TestVerifyRequiresEveryField drops each field of the attestation's JSON in turn (every field
// of the type, found by reflection, so that a field added later is covered too) and each entry
// of its maps: the attester that stops checking any one fact must fail the probe.
func TestVerifyRequiresEveryField(t *testing.T) {
	a, o, r := validAttestation()
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	var full map[string]json.RawMessage
	if err := json.Unmarshal(raw, &full); err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(readiness.Attestation{})
	if typ.NumField() != len(full) {
		t.Fatalf("the valid attestation sets %d fields, the type has %d", len(full), typ.NumField())
	}
	decodeVerify := func(t *testing.T, m map[string]json.RawMessage) error {
		b, _ := json.Marshal(m)
		att, err := readiness.DecodeAttestation(b)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		_, verr := readiness.Verify(att, o, r)
		if verr == nil {
			return nil
		}
		return verr
	}
	for i := 0; i < typ.NumField(); i++ {
		key := strings.Split(typ.Field(i).Tag.Get("json"), ",")[0]
		t.Run("drop/"+key, func(t *testing.T) {
			m := map[string]json.RawMessage{}
			for k, v := range full {
				if k != key {
					m[k] = v
				}
			}
			if err := decodeVerify(t, m); err == nil {
				t.Errorf("an attestation without %q passed", key)
			}
		})
		var inner map[string]json.RawMessage
		if json.Unmarshal(full[key], &inner) != nil || len(inner) == 0 {
			continue
		}
		for sub := range inner {
			if key == "namespaces" && sub == "cgroup" {
				continue // not required: the cgroup namespace is not part of the boundary
			}
			t.Run("drop/"+key+"."+sub, func(t *testing.T) {
				in := map[string]json.RawMessage{}
				for k, v := range inner {
					if k != sub {
						in[k] = v
					}
				}
				m := map[string]json.RawMessage{}
				for k, v := range full {
					m[k] = v
				}
				m[key], _ = json.Marshal(in)
				if err := decodeVerify(t, m); err == nil {
					t.Errorf("an attestation without %s.%s passed", key, sub)
				}
			})
		}
	}
}

// TestVerifyRefusesWrongValues flips each attested fact and each host observation.
func TestVerifyRefusesWrongValues(t *testing.T) {
	bad := &readiness.Check{OK: false, Detail: "reached"}
	for _, tc := range []struct {
		name   string
		mod    func(*readiness.Attestation, *readiness.Observed, *readiness.Requirements)
		reason readiness.Reason
	}{
		{"nonce", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) { a.Nonce = "replayed" }, readiness.ReasonAttestationFailed},
		{"version", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) { a.Version = 0 }, readiness.ReasonAttestationFailed},
		{"user namespace is the host's", func(a *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) {
			a.Namespaces = map[string]uint64{"ipc": 102, "mnt": 103, "net": 104, "pid": 105, "user": 6, "uts": 107}
		}, readiness.ReasonAttestationFailed},
		{"pid namespace differs from the box's", func(a *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) {
			a.Namespaces = map[string]uint64{"ipc": 102, "mnt": 103, "net": 104, "pid": 999, "user": 106, "uts": 107}
		}, readiness.ReasonAttestationFailed},
		{"host namespaces unknown", func(_ *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) {
			o.HostNamespaces = nil
		}, readiness.ReasonAttestationFailed},
		{"lo down", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.LoopbackUp = ptr(false)
		}, readiness.ReasonAttestationFailed},
		{"second interface", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.Interfaces = []string{"lo", "eth0"}
		}, readiness.ReasonNetworkSetupFailed},
		{"route out", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.RoutesOut = []string{"ipv4 0 via eth0"}
		}, readiness.ReasonAttestationFailed},
		{"host tcp", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) { a.HostTCP = bad }, readiness.ReasonAttestationFailed},
		{"host abstract", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) { a.HostAbstract = bad }, readiness.ReasonAttestationFailed},
		{"listener hit", func(_ *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) { o.ListenerHits = 1 }, readiness.ReasonAttestationFailed},
		{"x11", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) { a.X11 = bad }, readiness.ReasonAttestationFailed},
		{"session sockets", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.SessionSockets = bad
		}, readiness.ReasonAttestationFailed},
		{"gui env", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) { a.GUIEnv = bad }, readiness.ReasonAttestationFailed},
		{"no landlock", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.LandlockABI = ptr(0)
		}, readiness.ReasonLandlockUnavailable},
		{"landlock abi 1", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.LandlockABI = ptr(1)
		}, readiness.ReasonLandlockABITooOld},
		{"landlock abi 5 with egress allow", func(a *readiness.Attestation, _ *readiness.Observed, r *readiness.Requirements) {
			a.LandlockABI = ptr(5)
			r.MinLandlockABI = 6
		}, readiness.ReasonLandlockABITooOld},
		{"landlock not enforced", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.LandlockEnforced = bad
		}, readiness.ReasonAttestationFailed},
		{"workspace not writable", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.WorkspaceWritable = bad
		}, readiness.ReasonAttestationFailed},
		{"seccomp mode 0", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.SeccompMode = ptr(0)
		}, readiness.ReasonSeccompUnavailable},
		{"ptrace allowed", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.SeccompDenied = map[string]string{"ptrace": "ESRCH", "bpf": "EPERM", "io_uring_setup": "ENOSYS"}
		}, readiness.ReasonAttestationFailed},
		{"io_uring allowed", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.SeccompDenied = map[string]string{"ptrace": "EPERM", "bpf": "EPERM", "io_uring_setup": "EINVAL"}
		}, readiness.ReasonAttestationFailed},
		{"no_new_privs 0", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.NoNewPrivs = ptr(0)
		}, readiness.ReasonAttestationFailed},
		{"effective caps", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.Caps = map[string]string{"CapEff": "0000000000200000", "CapPrm": "0", "CapAmb": "0", "CapInh": "0", "CapBnd": "0"}
		}, readiness.ReasonAttestationFailed},
		{"empty caps value", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.Caps = map[string]string{"CapEff": "", "CapPrm": "0", "CapAmb": "0", "CapInh": "0", "CapBnd": "0"}
		}, readiness.ReasonAttestationFailed},
		{"secret read", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.SecretUnreadable = bad
		}, readiness.ReasonAttestationFailed},
		{"host pids visible", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.HostPidsHidden = bad
		}, readiness.ReasonAttestationFailed},
		{"init signalable", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.InitUnsignalable = bad
		}, readiness.ReasonAttestationFailed},
		{"no grandchild", func(a *readiness.Attestation, _ *readiness.Observed, _ *readiness.Requirements) {
			a.Grandchild = ptr(0)
		}, readiness.ReasonAttestationFailed},
		{"grandchild not seen", func(_ *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) {
			o.GrandchildSeen = false
		}, readiness.ReasonAttestationFailed},
		{"attester failed", func(_ *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) { o.ExitCode = ptr(1) }, readiness.ReasonAttestationFailed},
		{"no exit status", func(_ *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) { o.ExitCode = nil }, readiness.ReasonAttestationFailed},
		{"not settled", func(_ *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) { o.Settled = false }, readiness.ReasonUnsettled},
		{"grandchild survived", func(_ *readiness.Attestation, o *readiness.Observed, _ *readiness.Requirements) {
			o.GrandchildGone = false
		}, readiness.ReasonUnsettled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, o, r := validAttestation()
			tc.mod(a, &o, &r)
			_, err := readiness.Verify(a, o, r)
			if err == nil {
				t.Fatal("Verify passed")
			}
			if err.Reason != tc.reason {
				t.Errorf("reason %s (%s), want %s", err.Reason, err.Detail, tc.reason)
			}
		})
	}
	t.Run("no attestation", func(t *testing.T) {
		_, o, r := validAttestation()
		if _, err := readiness.Verify(nil, o, r); err == nil {
			t.Fatal("Verify(nil) passed")
		}
	})
}

func TestDecodeRefusesUnknownFields(t *testing.T) {
	if _, err := readiness.DecodeAttestation([]byte(`{"version":1,"allGood":true}`)); err == nil {
		t.Fatal("an unknown field was accepted")
	}
}

func TestRequirementsFor(t *testing.T) {
	p, err := plan.Build(plan.Input{ID: "x", Program: "/usr/bin/agentbox", Workspace: "/w", Home: "/home/u", RunDir: "/r"})
	if err != nil {
		t.Fatal(err)
	}
	if r := readiness.RequirementsFor(p, nonce, false); r.MinLandlockABI != 2 || !r.OwnNetwork || len(r.Namespaces) != 6 {
		t.Errorf("deny plan: %+v", r)
	}
	if r := readiness.RequirementsFor(p, nonce, true); r.MinLandlockABI != 6 {
		t.Errorf("egress allow configured: minimum ABI %d, want 6", r.MinLandlockABI)
	}
}

func TestEveryReasonHasAHint(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range readiness.Reasons() {
		h := r.Hint()
		if h == "" || strings.Contains(h, "\n") || h == "run `agentbox doctor`" {
			t.Errorf("%s: hint %q", r, h)
		}
		if seen[string(r)] {
			t.Errorf("duplicate reason %s", r)
		}
		seen[string(r)] = true
	}
}
