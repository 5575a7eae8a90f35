package relay

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCredentialSource covers the one credential source of the LLM and git relays: a command's
// output is reused for the TTL and run again after it or after Invalidate, a failure is a
// *CredentialError of the caller's class whose Detail names the key, and a file of another
// owner is refused.
func TestCredentialSource(t *testing.T) {
	dir := t.TempDir()
	count := filepath.Join(dir, "runs")
	script := filepath.Join(dir, "helper")
	// Each run appends a line to runs and prints the secret.
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho run >> "+count+"\necho ' secret'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		b, _ := os.ReadFile(count)
		return strings.Count(string(b), "run")
	}
	class := errors.New("test credential unusable")
	now := time.Unix(1_000_000, 0)
	s := NewCredentialSource(Credential{Key: "x.credential", Command: []string{script}, TTL: time.Minute, Class: class,
		Now: func() time.Time { return now }})
	get := func() {
		t.Helper()
		if v, err := s.Get(t.Context()); err != nil || v != "secret" {
			t.Fatalf("Get = %q, %v", v, err)
		}
	}
	get()
	get()
	if n := runs(); n != 1 {
		t.Fatalf("the command ran %d times within its TTL, want 1", n)
	}
	now = now.Add(time.Minute)
	get()
	if n := runs(); n != 2 {
		t.Fatalf("the command ran %d times after its TTL, want 2", n)
	}
	s.Invalidate()
	get()
	if n := runs(); n != 3 {
		t.Fatalf("the command ran %d times after Invalidate, want 3", n)
	}

	never := NewCredentialSource(Credential{Key: "x.credential", Command: []string{script}, TTL: -1})
	for range 2 {
		if _, err := never.Get(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := runs(); n != 5 {
		t.Fatalf("a negative TTL: the command ran %d times in all, want 5", n)
	}

	failing := NewCredentialSource(Credential{Key: "x.credential", Command: []string{"false"}, Class: class})
	_, err := failing.Get(t.Context())
	var ce *CredentialError
	if !errors.Is(err, class) || !errors.As(err, &ce) || ce.Detail != `x.credential.command "false" failed: exit status 1` {
		t.Fatalf("err = %#v, want a *CredentialError of the class with the key in Detail", err)
	}
	if err.Error() != class.Error()+": "+ce.Detail {
		t.Errorf("Error() = %q", err.Error())
	}

	// Another owner is refused (checked without root: the uid is the one compared).
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := NewCredentialSource(Credential{Key: "x.credential", File: good, Class: class})
	if v, err := f.Get(t.Context()); err != nil || v != "secret" {
		t.Fatalf("own file: %q, %v", v, err)
	}
	f = NewCredentialSource(Credential{Key: "x.credential", File: good, Class: class})
	f.uid = os.Getuid() + 1
	if _, err := f.Get(t.Context()); !errors.As(err, &ce) || !strings.Contains(ce.Detail, "owned by uid") || !strings.HasPrefix(ce.Detail, `x.credential.file "`) {
		t.Fatalf("foreign owner: %v", err)
	}
	if _, err := NewCredentialSource(Credential{Key: "x.credential"}).Get(t.Context()); err == nil || !strings.Contains(err.Error(), "neither x.credential.file nor x.credential.command") {
		t.Fatalf("no file, no command: %v", err)
	}
}

// TestCredentialCommandFoundOnce (review 19, F1): a credential command's program is found when
// its source is made, at the launch, and never again: a helper named by an absolute path
// where nothing was then (a workspace path a box writes later) fails every request, naming
// the key, and is not run once a file is there; and the helper runs in "/", so a relative
// argument names nothing of the daemon's folder.
func TestCredentialCommandFoundOnce(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "token")
	marker := filepath.Join(dir, "ran")
	s := NewCredentialSource(Credential{Key: "x.credential", Command: []string{helper}})
	if err := os.WriteFile(helper, []byte("#!/bin/sh\ntouch "+marker+"\necho secret\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	v, err := s.Get(t.Context())
	if err == nil || v != "" || !strings.Contains(err.Error(), "x.credential.command") || !strings.Contains(err.Error(), helper) {
		t.Fatalf("Get = %q, %v; want the failure of a helper not found when the source was made, naming the key and %s", v, err, helper)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the helper written after the source was made ran")
	}

	pwd := NewCredentialSource(Credential{Key: "x.credential", Command: []string{"/bin/sh", "-c", "pwd"}, TTL: -1})
	if v, err := pwd.Get(t.Context()); err != nil || v != "/" {
		t.Fatalf("the helper ran in %q (%v), want /", v, err)
	}
}
