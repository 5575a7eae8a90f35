package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
)

// FuzzDecodeRequest feeds arbitrary bodies to the local API's request decoder, as a launch and
// as a session request. It must never panic; it refuses with bad_request, or returns a value
// that encodes and decodes to itself (nothing of the body is half-applied).
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"program":"claude","path":"/usr/bin/claude","args":["-p","hi"],"workspace":"/w","cwd":"/w","env":["TERM=xterm"],"tty":true}`,
		`{"program":"sh","path":"/bin/sh","workspace":"/w","detach":true,"egress":"allow"}`,
		`{"clientId":"my-script"}`,
		`{"program":"x","unknown":1}`,
		`{"args":null,"env":[]}`,
		`[]`, `null`, `{"program":"\u0000"}`, `{"program":"a"}{"program":"b"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		check := func(v, again any) {
			r := httptest.NewRequest("POST", "http://agentbox/v0/launches", bytes.NewReader(body))
			err := decodeBody(r, v)
			if err != nil {
				var ae *api.Error
				if !errors.As(err, &ae) || ae.Code != api.CodeBadRequest {
					t.Fatalf("decodeBody(%q) = %v, want a bad_request *api.Error", body, err)
				}
				return
			}
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("re-encode %#v: %v", v, err)
			}
			r = httptest.NewRequest("POST", "http://agentbox/v0/launches", bytes.NewReader(b))
			if err := decodeBody(r, again); err != nil {
				t.Fatalf("decode of the re-encoded %s: %v", b, err)
			}
			// Empty and absent lists are the same request: compare encodings.
			b2, err := json.Marshal(again)
			if err != nil || !bytes.Equal(b, b2) {
				t.Fatalf("round trip of %q: %s != %s (%v)", body, b, b2, err)
			}
		}
		check(&api.LaunchRequest{}, &api.LaunchRequest{})
		check(&api.SessionRequest{}, &api.SessionRequest{})
	})
}

// FuzzCheckRequest feeds arbitrary headers to the local API's request check: a request passes
// only with no Origin and no Referer, a Host of agentbox or localhost (any port), and the
// permission the route needs.
func FuzzCheckRequest(f *testing.F) {
	f.Add("agentbox", "", "", true, true)
	f.Add("localhost:80", "", "", false, false)
	f.Add("evil.example", "", "", true, true)
	f.Add("agentbox", "http://evil.example", "", true, true)
	f.Add("agentbox", "", "http://evil.example/x", true, true)
	f.Add("agentbox.evil.example", "", "", true, false)
	f.Add("localhost:", "null", "", true, true)
	f.Fuzz(func(t *testing.T, host, origin, referer string, granted, needWrite bool) {
		r := httptest.NewRequest("GET", "http://agentbox/v0/info", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if referer != "" {
			r.Header.Set("Referer", referer)
		}
		g, need := permRead, permRead
		if granted {
			g = permWrite
		}
		if needWrite {
			need = permWrite
		}
		r = r.WithContext(context.WithValue(r.Context(), permKey{}, g))
		err := checkRequest(r, need)
		name, _, _ := strings.Cut(host, ":")
		want := r.Header.Get("Origin") == "" && r.Header.Get("Referer") == "" &&
			(name == "agentbox" || name == "localhost") && g >= need
		if (err == nil) != want {
			t.Fatalf("checkRequest(host %q, origin %q, referer %q, granted %v, need %v) = %v, want pass=%v",
				host, origin, referer, g, need, err, want)
		}
		if err != nil {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.CodeForbidden {
				t.Fatalf("refusal is %v, want a forbidden *api.Error", err)
			}
		}
	})
}
