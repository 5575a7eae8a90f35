package integrity

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPackedReplaceAsGit (review 14, F14): packed-refs files with records separated by each of
// git's whitespace bytes (space, TAB, CR, LF), peeled lines, with and without the header's
// "sorted" trait, are read by the host's git (for-each-ref refs/replace/) and by the check:
// every replace ref git lists is one the check finds, and after the strip git lists none.
// Before, a TAB after the id hid a replace ref from the check.
func TestPackedReplaceAsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ws, _ := filepath.EvalSymlinks(t.TempDir())
	run := func(stdin string, args ...string) (string, error) {
		c := exec.Command("git", args...)
		c.Dir = ws
		c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		c.Stdin = strings.NewReader(stdin)
		var stderr strings.Builder
		c.Stderr = &stderr // warnings (a broken ref) are not refs
		b, err := c.Output()
		if err != nil {
			err = fmt.Errorf("%v: %s", err, stderr.String())
		}
		return string(b), err
	}
	if out, err := run("", "init", "-q"); err != nil {
		t.Fatalf("git init: %v\n%s", err, out)
	}
	var ids []string
	for i := range 6 {
		out, err := run(fmt.Sprintf("blob %d\n", i), "hash-object", "-w", "--stdin")
		if err != nil {
			t.Fatalf("git hash-object: %v\n%s", err, out)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	// listed returns the replace refs git reads from text, or the error git stops with.
	listed := func(text string) ([]string, error) {
		if err := os.WriteFile(filepath.Join(ws, ".git/packed-refs"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := run("", "for-each-ref", "--format=%(refname)", "refs/replace/")
		if err != nil {
			return nil, err
		}
		return strings.Fields(out), nil
	}
	cases := []string{
		"# pack-refs with: peeled fully-peeled sorted \n" + ids[0] + "\trefs/replace/" + ids[1] + "\n",
		ids[0] + "\trefs/replace/" + ids[1] + "\n",
		ids[0] + " refs/heads/main\n" + ids[2] + "\rrefs/replace/" + ids[3] + "\n",
		"# pack-refs with: peeled fully-peeled sorted \n" + ids[0] + "\nrefs/replace/" + ids[1] + "\n",
		"# pack-refs with: peeled \n" + ids[0] + " refs/heads/a\n" + ids[4] + "\nrefs/replace/" + ids[5] + "\n",
		ids[0] + " refs/replace/" + ids[1] + "\r\n^" + ids[2] + "\n",
	}
	seps := []string{" ", "\t", "\r", "\n"}
	rng := rand.New(rand.NewSource(14))
	for range 40 {
		var recs []string
		for i := range 1 + rng.Intn(5) {
			name := fmt.Sprintf("refs/heads/b%d", i)
			if rng.Intn(2) == 0 {
				name = "refs/replace/" + ids[rng.Intn(len(ids))]
			}
			r := ids[rng.Intn(len(ids))] + seps[rng.Intn(len(seps))] + name + "\n"
			if rng.Intn(4) == 0 {
				r += "^" + ids[rng.Intn(len(ids))] + "\n"
			}
			recs = append(recs, r)
		}
		h := ""
		if rng.Intn(2) == 0 {
			h = "# pack-refs with: peeled fully-peeled sorted \n"
			slices.Sort(recs)
		}
		cases = append(cases, h+strings.Join(recs, ""))
	}
	seen := 0
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			git, err := listed(c)
			if err != nil {
				t.Logf("git refuses it (%v): it reads no replace ref from it", err)
			}
			found := strings.Join(packedReplace([]byte(c)), "\n")
			for _, r := range git {
				seen++
				if !strings.Contains(found, r) {
					t.Errorf("git reads the replace ref %s, the check finds %q in:\n%q", r, found, c)
				}
			}
			stripped, _ := withoutReplace([]byte(c), nil)
			if after, err := listed(string(stripped)); len(after) > 0 {
				t.Errorf("git still reads %v (%v) after the strip of:\n%q\nto:\n%q", after, err, c, stripped)
			}
		})
	}
	if seen == 0 {
		t.Fatal("git read no replace ref from any case: the test proves nothing")
	}
}

// TestPackedRefsFindingOnce: a packed-refs whose replace refs could not be removed is recorded
// once, not at every check (review 15, F14 saw the same finding 15 times in a second): here a
// file with one record of 65 MiB that the launch did not write (its snapshot time is moved
// past the file's ctime), which is neither read nor moved aside.
func TestPackedRefsFindingOnce(t *testing.T) {
	ws := newWS(t)
	packed := filepath.Join(ws, "p/.git/packed-refs")
	mustWrite(t, filepath.Join(ws, "p/.git/HEAD"), "ref: refs/heads/main\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	s.Started = time.Now().Add(time.Hour)
	mustWrite(t, packed, "# pack-refs with: peeled\n")
	if err := os.Truncate(packed, 65<<20); err != nil {
		t.Fatal(err)
	}
	var on []Transition
	for _, tr := range s.VerifyExec() {
		if tr.Path == packed {
			on = append(on, tr)
		}
	}
	if len(on) != 1 || !on[0].Alert || !strings.Contains(on[0].Detail, "could not be removed") {
		t.Fatalf("transitions on packed-refs %+v, want one alert saying the replace refs could not be removed", on)
	}
	for range 3 {
		for _, tr := range s.VerifyExec() {
			if tr.Path == packed {
				t.Errorf("recorded again: %+v", tr)
			}
		}
	}
	if _, err := os.Stat(packed); err != nil {
		t.Errorf("a packed-refs the launch did not write was moved: %v", err)
	}
}
