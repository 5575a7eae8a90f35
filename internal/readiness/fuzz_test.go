package readiness_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/readiness"
)

// FuzzDecodeAttestation feeds arbitrary bytes (what a compromised attester could print) to the
// attestation decoder and verifier. Neither may panic, and Verify may accept only an
// attestation that proves the boundary: the nonce echoed, no_new_privs, seccomp mode 2, empty
// capability sets and loopback as the only interface.
func FuzzDecodeAttestation(f *testing.F) {
	a, _, _ := validAttestation()
	valid, err := json.Marshal(a)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add([]byte(strings.Replace(string(valid), `"noNewPrivs":1`, `"noNewPrivs":0`, 1)))
	f.Add([]byte(strings.Replace(string(valid), `"interfaces":["lo"]`, `"interfaces":["lo","eth0"]`, 1)))
	f.Add([]byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"extra":true}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"caps":{"CapEff":null}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := readiness.DecodeAttestation(b)
		if err != nil {
			return
		}
		_, o, r := validAttestation()
		if _, verr := readiness.Verify(a, o, r); verr != nil {
			return
		}
		switch {
		case a.Nonce != r.Nonce:
			t.Fatalf("accepted nonce %q, want %q", a.Nonce, r.Nonce)
		case a.NoNewPrivs == nil || *a.NoNewPrivs != 1:
			t.Fatalf("accepted noNewPrivs %v", a.NoNewPrivs)
		case a.SeccompMode == nil || *a.SeccompMode != 2:
			t.Fatalf("accepted seccompMode %v", a.SeccompMode)
		}
		for _, c := range readiness.CapSets {
			if strings.Trim(a.Caps[c], "0") != "" || a.Caps[c] == "" {
				t.Fatalf("accepted %s = %q", c, a.Caps[c])
			}
		}
		for _, i := range a.Interfaces {
			if i != "lo" {
				t.Fatalf("accepted interface %q", i)
			}
		}
	})
}
