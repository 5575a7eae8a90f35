package integrity

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The parsers of what git reads (ParseConfig, ignoresItself) against the host's own git, on
// the cases below and on generated text (review 13, F5 and F6: both parsers were
// approximations a box could step past). FuzzParseConfig and FuzzIgnoresItself search
// further (scripts/fuzz.sh).

// gitEnv is the environment of the reference git: no configuration of the host's.
func gitEnv(home string) []string {
	return append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+home, "LC_ALL=C")
}

// gitConfigList returns the variables the host's git reads from the config text (git config
// --file --list -z), each "name\nvalue" ("name\ntrue" for a bare one), and whether git read
// the file at all.
func gitConfigList(t testing.TB, dir string, text []byte) ([]string, bool) {
	t.Helper()
	f := filepath.Join(dir, "config")
	if err := os.WriteFile(f, text, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "config", "--file", f, "--list", "-z")
	cmd.Env = gitEnv(dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if !strings.Contains(stderr.String(), "bad config line") {
			t.Fatalf("git config --list: %v: %s", err, stderr.String())
		}
		return nil, false
	}
	var list []string
	for _, rec := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if rec == "" {
			continue
		}
		if !strings.Contains(rec, "\n") {
			rec += "\ntrue"
		}
		list = append(list, rec)
	}
	return list, true
}

// compareConfig fails when ParseConfig reads text otherwise than the host's git.
func compareConfig(t testing.TB, dir string, text []byte) {
	t.Helper()
	want, ok := gitConfigList(t, dir, text)
	entries, err := ParseConfig(text)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name()+"\n"+e.Value)
	}
	switch {
	case !ok && err == nil:
		t.Errorf("git refuses %q, ParseConfig reads it: %q", text, got)
	case ok && err != nil:
		t.Errorf("git reads %q as %q, ParseConfig fails: %v", text, want, err)
	case ok && !slices.Equal(got, want):
		t.Errorf("config %q:\n git reads  %q\nParseConfig %q", text, want, got)
	}
}

// configCases are texts whose reading by git is the point: what review 13 found, and the
// tokenizer's corners.
var configCases = []string{
	"[core] fsmonitor = \"touch /tmp/x #]\"\n", // F6: the header ends at the first "]"
	"[core]fsmonitor=x]\n",
	"[core \"a]b\"] fsmonitor = x\n",
	"[core \"a\\\"]\"] k = x\n",
	"[core]\n\tfsmonitor = \"a\\\n b\"\n",
	"[core]\n\tfsmonitor = a\\\nb\n",
	"[core]\n\tfsmonitor\n",
	"[core]\n\tfsmonitor = \"unterminated\n",
	"[core]\n\tfsmonitor = a\\q\n",
	"[core]\n\tfsmonitor # c\n",
	"[core]\n\tfsmonitor = x ; c\n",
	"[core]\n\tfsmonitor = \"x ; y\" # c\n",
	"[core]\r\n\tfsmonitor = x\r\n",
	"[core]\r\tfsmonitor = x\n",
	"\xef\xbb\xbf[core]\n\tfsmonitor = x\n",
	"\xef\xbb[core]\n\tfsmonitor = x\n",
	"[core.sub]\n\tk = x\n",
	"[Core.Sub]\n\tK = x\n",
	"[core.]\n\tfsmonitor = x\n",
	"[core \"\"]\n\tfsmonitor = x\n",
	"[core \"Sub\"]\n\tk = x\n",
	"[ \"sub\"]\n\tk = x\n",
	"[]\n\tk = x\n",
	"[core\n\tk = x\n",
	"[core \"a\nb\"]\n\tk = x\n",
	"[core  \t\"x\"]\n\tk = x\n",
	"[core \"x\" ]\n\tk = x\n",
	"k = x\n",
	"[core]\n\tfsmonitor = a\x00b\n",
	"[core \"a\x00b\"]\n\tfsmonitor = x\n",
	"[core]\n\tfsmonitor = x\t\ty  \n",
	"[core]\n\tfsmonitor = \"  x  \"\n",
	"[core]\n\tfsmonitor = \\t\\n\\b\\\\\\\"\n",
	"[core]\n\tfsmonitor =\n",
	"[core]\n\t1k = x\n",
	"[core]\n\tk-1 = x\n",
	"[core]\n\tk_1 = x\n",
	"[core]\n\tfsmonitor = x",
	"[core]\n\tfsmonitor = x\\",
	"[core] ; c\n\tfsmonitor = x\n",
	"[core] # ]\n\tfsmonitor = x\n",
	"[co-re]\n\tk = x\n",
	"[co_re]\n\tk = x\n",
	"[core]\n\tfsmonitor\t= x\n",
	"[core]\n\tfs monitor = x\n",
	"[core]\n\tfsmonitor = \"a\"b\"c\"\n",
	"[alias] x = !sh\n[alias] y\n",
	"",
	"\n\n",
	"# only\n; comments\n",
	"\xef\xbb\xbf",
}

// configTokens build the generated texts: the tokenizer's special characters and a few names.
var configTokens = []string{
	"[", "]", "\"", "\\", "#", ";", "=", "\n", "\n", "\r\n", "\r", " ", "\t", "\x00", ".",
	"core", "Core", "fsmonitor", "sub", "k", "-", "1", "x", "\\\n", "\\t", "\\n", "\\\"",
	"[core]", "[core \"s\"]", "[core.s]", "\n\tk = v", " = ", "\"a b\"", "#]", "é",
}

// genConfig returns a generated config text: header and variable lines with special tokens
// in them.
func genConfig(r *rand.Rand) []byte {
	var b strings.Builder
	if r.IntN(20) == 0 {
		b.WriteString("\xef\xbb\xbf")
	}
	for range 1 + r.IntN(4) {
		switch r.IntN(3) {
		case 0:
			b.WriteString("[core")
			if r.IntN(2) == 0 {
				b.WriteString(" \"s")
				b.WriteString(configTokens[r.IntN(len(configTokens))])
				b.WriteString("\"")
			}
			b.WriteString("]")
		case 1:
			b.WriteString("\tfsmonitor = ")
		}
		for range r.IntN(6) {
			b.WriteString(configTokens[r.IntN(len(configTokens))])
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// TestParseConfigAsGit guards review 13's F6: ParseConfig reads every case, and 40
// generated texts, as the host's git does (the same variables and values, in order; refused
// where git refuses). Before, "[core] fsmonitor = \"CMD #]\"" was a section named
// `core] fsmonitor = "CMD #` with no variable, while git runs CMD at every git status.
func TestParseConfigAsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := t.TempDir()
	for _, c := range configCases {
		compareConfig(t, dir, []byte(c))
	}
	r := rand.New(rand.NewPCG(13, 6))
	for range 40 {
		compareConfig(t, dir, genConfig(r))
	}
	if keys, err := ExecKeys([]byte(configCases[0])); !slices.Equal(keys, []string{"core.fsmonitor"}) || err != nil {
		t.Errorf("ExecKeys(%q) = %v, %v; want core.fsmonitor", configCases[0], keys, err)
	}
}

func FuzzParseConfig(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Skip("no git")
	}
	for _, c := range configCases {
		f.Add([]byte(c))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, text []byte) {
		compareConfig(t, dir, text)
	})
}

// gitIgnoresItself reports, for each .gitignore text, whether the host's git ignores the
// .gitignore holding it (git check-ignore --no-index, all in one run: each text in a folder
// of its own).
func gitIgnoresItself(t testing.TB, texts [][]byte) []bool {
	t.Helper()
	ws := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", ws).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	var in bytes.Buffer
	for i, text := range texts {
		d := filepath.Join(ws, fmt.Sprint(i))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, ".gitignore"), text, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "%d/.gitignore\x00", i)
	}
	cmd := exec.Command("git", "check-ignore", "--no-index", "--stdin", "-z")
	cmd.Dir, cmd.Env, cmd.Stdin = ws, gitEnv(ws), &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && stderr.Len() > 0 { // exit 1 alone: nothing ignored
		t.Fatalf("git check-ignore: %v: %s", err, stderr.String())
	}
	got := make([]bool, len(texts))
	for _, p := range strings.Split(string(out), "\x00") {
		var i int
		if _, err := fmt.Sscanf(p, "%d/.gitignore", &i); err == nil && i < len(texts) {
			got[i] = true
		}
	}
	return got
}

// compareIgnores fails for each text ignoresItself judges otherwise than the host's git.
func compareIgnores(t testing.TB, texts [][]byte) {
	t.Helper()
	for i, want := range gitIgnoresItself(t, texts) {
		if got := ignoresItself(texts[i]); got != want {
			t.Errorf("a .gitignore holding %q: git ignores it: %v, ignoresItself: %v", texts[i], want, got)
		}
	}
}

// ignoreCases are .gitignore texts whose verdict is the point: review 13's (a byte order
// mark, "[!x]"), git's wildmatch corners, and the usual ways to keep a folder.
var ignoreCases = []string{
	"[!x]gitignore\nzz*\n", "\xef\xbb\xbf*\n", "[^x]gitignore\n", "\\.gitignore\n", ".git[[:alpha:]]gnore\n",
	".git[[:digit:]]gnore\n", ".gi[s-u]ignore\n", ".gi[!s-u]ignore\n", "[[:punct:]]gitignore\n", "[]]gitignore\n",
	"[.]gitignore\n", ".gitignor[e\n", ".gitignore\\\n", "\\!x\n!.gitignore\n*\n", "*\n!.gitignore\n",
	"*\n!/.gitignore\n", "*\n\\!.gitignore\n", "*\r\n", "*\r\r\n", "* \n", "*\\ \n", "*\t\n", "/*\n", "**\n",
	"**/.gitignore\n", "a/**/.gitignore\n", "**/**/.gitignore\n", "*/.gitignore\n", "/**\n", ".git*\n",
	"*ignore  \n", "build/\n", "*/\n", "a/*\n", "# *\n", "!*\n", "*.o\n", "", "*", "\x00*\n", "*\x00\n",
	".gitignore/\n", "\n*", "#\n*\n", " #x\n", " *\n", "?gitignore\n", "??gitignore\n", "[a-]gitignore\n",
	"[-.]gitignore\n", "[\\.]gitignore\n", "[[:foo:]]gitignore\n", "[[:alpha:]gitignore\n", "\xef\xbb*\n",
}

// ignoreTokens build the generated .gitignore texts.
var ignoreTokens = []string{
	"*", "*", "?", "[", "]", "!", "^", "\\", "/", "**", ".", "gitignore", ".gitignore", "g", "i", "t",
	"n", "o", "r", "e", "x", "-", "[:alpha:]", "[:", ":]", " ", "\\ ", "#", "\r", "\n", "a-z", "\t",
}

func genIgnore(r *rand.Rand) []byte {
	var b strings.Builder
	if r.IntN(20) == 0 {
		b.WriteString("\xef\xbb\xbf")
	}
	for range 1 + r.IntN(3) {
		for range 1 + r.IntN(5) {
			b.WriteString(ignoreTokens[r.IntN(len(ignoreTokens))])
		}
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// TestIgnoresItselfAsGit guards review 13's F5: ignoresItself judges every case, and 600
// generated .gitignore texts, as the host's git check-ignore does. Before, path.Match read
// "[!x]gitignore" with "!" as a member and a byte order mark as part of the first pattern.
func TestIgnoresItselfAsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	var texts [][]byte
	for _, c := range ignoreCases {
		texts = append(texts, []byte(c))
	}
	r := rand.New(rand.NewPCG(13, 5))
	for range 600 {
		texts = append(texts, genIgnore(r))
	}
	compareIgnores(t, texts)
}

func FuzzIgnoresItself(f *testing.F) {
	if _, err := exec.LookPath("git"); err != nil {
		f.Skip("no git")
	}
	for _, c := range ignoreCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		compareIgnores(t, [][]byte{text})
	})
}

// TestScanFailsClosed guards review 13's F7 (and F6's fail-closed rule) for what the scan
// judges by content: a hook rewritten past its first MiB (same size, same first MiB: its hash
// of that MiB did not change), a nested config git refuses, a commondir longer than any path
// and a packed-refs with a record over 1 MiB are each a finding; the hook and the config,
// changed or new, are moved aside, the commondir too, and the packed-refs (written while the
// box ran) whole. Without the fix none of them is reported.
func TestScanFailsClosed(t *testing.T) {
	ws := newWS(t)
	hook := filepath.Join(ws, "n/.git/hooks/pre-commit")
	mustWrite(t, hook, "#!/bin/sh\n"+strings.Repeat("# padding\n", 110000)+": harmless\n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	f, err := os.OpenFile(hook, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("touch /x  \n"), 1_100_000-1); err != nil { // the last line
		t.Fatal(err)
	}
	f.Close()
	bad := filepath.Join(ws, "bad/.git/config")
	mustWrite(t, bad, "[core]\n\tk = a\\q\n") // git: bad config line 2
	common := filepath.Join(ws, "c/.git/commondir")
	mustWrite(t, common, strings.Repeat("./", 2500)+"x\n")
	packed := filepath.Join(ws, "p/.git/packed-refs")
	mustWrite(t, packed, "# pack-refs with: peeled\n")
	if err := os.Truncate(packed, 65<<20); err != nil { // sparse: one record of NULs
		t.Fatal(err)
	}
	got := map[string]Transition{}
	for _, tr := range s.VerifyExec() {
		got[tr.Path] = tr
	}
	for p, want := range map[string]string{hook: "moved aside", bad: "moved aside", common: "moved aside", packed: "moved aside whole"} {
		tr, ok := got[p]
		if !ok || !tr.Alert || !strings.Contains(tr.Detail, want) {
			t.Errorf("%s: transition %+v (found: %v), want an alert saying %q", p, tr, ok, want)
		}
	}
	if d := got[bad].Detail; !strings.Contains(d, "bad config line 2") {
		t.Errorf("the unreadable config's finding does not say why: %q", d)
	}
}

// TestAttackGitFileBlanks: a .git file is read as git reads it. "gitdir: PATH  " names the
// folder "PATH  " to git (the blanks are the path's); the scan trimmed them and read PATH, so a
// gitdir with core.fsmonitor hidden inside a nested repository's .git (where the scan does not
// walk) ran at the host's git status in the worktree. Without the fix the marker appears.
func TestAttackGitFileBlanks(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	ws := newWS(t)
	gitIn(ws, "", false, "init", "-q", "n")
	s := Snapshot(resolveWS(t, ws), Limits{})
	gd := filepath.Join(ws, "n/.git/g  ")
	gitIn(ws, "", false, "init", "-q", "--separate-git-dir", gd, "w")
	mustWrite(t, filepath.Join(ws, "w/.git"), "gitdir: ../n/.git/g  \n")
	mustWrite(t, filepath.Join(ws, "w/f"), "x\n")
	marker := filepath.Join(t.TempDir(), "ran")
	cfg, err := os.OpenFile(filepath.Join(gd, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(cfg, "[core]\n\tfsmonitor = \"touch %s; :\"\n", marker)
	cfg.Close()
	if got, ok := ReadGitdir(filepath.Join(ws, "w/.git")); got != gd || !ok {
		t.Errorf("ReadGitdir = %q, %v; want %q", got, ok, gd)
	}
	s.VerifyExec()
	gitIn(filepath.Join(ws, "w"), "", false, "status", "--porcelain")
	if _, err := os.Lstat(marker); err == nil {
		t.Errorf("the host's git status in w ran the fsmonitor of %s", gd)
	}
}

// gitDirPart makes one part of a folder that may be a git directory: HEAD, objects, refs or
// commondir, at path.
type gitDirPart func(t *testing.T, path string)

func partFile(content string, mode os.FileMode) gitDirPart {
	return func(t *testing.T, p string) {
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
}

func partLink(target string) gitDirPart {
	return func(t *testing.T, p string) {
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
}

func partDir(mode os.FileMode) gitDirPart {
	return func(t *testing.T, p string) {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
}

var (
	oid40 = strings.Repeat("3f", 20)
	// headParts are HEADs git accepts and refuses (validate_headref).
	headParts = map[string]gitDirPart{
		"absent": nil, "ref": partFile("ref: refs/heads/main\n", 0o644), "ref-nospace": partFile("ref:refs/x", 0o644),
		"ref-blanks": partFile("ref: \t\r\n refs/heads/main", 0o644), "ref-vt": partFile("ref:\vrefs/heads/main\n", 0o644),
		"ref-heads": partFile("ref: heads/main\n", 0o644), "ref-upper": partFile("REF: refs/heads/main\n", 0o644),
		"oid": partFile(oid40+"\n", 0o644), "oid-upper": partFile(strings.ToUpper(oid40), 0o644),
		"oid-tail": partFile(oid40+"junk", 0o644), "oid-39": partFile(oid40[:39]+"\n", 0o644),
		"oid-64": partFile(strings.Repeat("ab", 32), 0o644), "oid-nul": partFile("\x00"+oid40, 0o644),
		"bom-ref": partFile("\xef\xbb\xbfref: refs/heads/main\n", 0o644), "empty": partFile("", 0o644),
		"junk": partFile("main\n", 0o644), "late-ref": partFile(strings.Repeat(" ", 300)+"ref: refs/heads/main\n", 0o644),
		"link-refs": partLink("refs/heads/main"), "link-heads": partLink("heads/main"), "link-short": partLink("refs"),
		"link-abs": partLink("/refs/heads/main"), "dir": partDir(0o755), "dir-ref": partDir(0o755),
	}
	// storeParts are objects/ and refs/ as git's access(X_OK) finds them.
	storeParts = map[string]gitDirPart{
		"absent": nil, "dir": partDir(0o755), "dir-0600": partDir(0o600), "file": partFile("", 0o644),
		"exe": partFile("", 0o755), "link-dir": partLink("."), "dangling": partLink("nowhere"),
	}
	// commonParts are commondir files: to a folder holding objects and refs (c), to one
	// holding objects only (o), to none.
	commonParts = map[string]gitDirPart{
		"absent": nil, "rel": partFile("../c\n", 0o644), "rel-crlf": partFile("../c\r\n\n", 0o644),
		"rel-objects-only": partFile("../o", 0o644), "missing": partFile("../none\n", 0o644),
		"rel-blank": partFile("../c \n", 0o644), "rel-nul": partFile("../c\x00junk", 0o644),
	}
)

// TestIsGitDirectoryAsGit compares isGitDirectory with the host's git on folders built from
// every HEAD of headParts (with objects and refs), every pair of storeParts (with a valid
// HEAD), every commondir of commonParts (with and without objects and refs of their own), and
// 60 combinations drawn at random: a folder is a git directory where git, started in it with
// the folder above as its ceiling, takes it for its git directory (git rev-parse
// --absolute-git-dir). Before, the scan wanted HEAD, objects and a config file, and missed a
// folder git takes for a repository whose config lies in the common dir its commondir names.
func TestIsGitDirectoryAsGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	type layout struct{ head, objects, refs, common string }
	var cases []layout
	for h := range headParts {
		cases = append(cases, layout{h, "dir", "dir", "absent"})
	}
	for o := range storeParts {
		for r := range storeParts {
			cases = append(cases, layout{"ref", o, r, "absent"})
		}
	}
	for c := range commonParts {
		cases = append(cases, layout{"ref", "absent", "absent", c}, layout{"oid", "dir", "dir", c})
	}
	r := rand.New(rand.NewPCG(20, 3))
	pick := func(m map[string]gitDirPart) string { return slices.Sorted(maps.Keys(m))[r.IntN(len(m))] }
	for range 60 {
		cases = append(cases, layout{pick(headParts), pick(storeParts), pick(storeParts), pick(commonParts)})
	}
	root := t.TempDir()
	nGit := 0
	for i, c := range cases {
		top := filepath.Join(root, fmt.Sprint(i))
		dir := filepath.Join(top, "repo")
		for _, d := range []string{dir, filepath.Join(top, "c/objects"), filepath.Join(top, "c/refs"), filepath.Join(top, "o/objects")} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for name, part := range map[string]gitDirPart{"HEAD": headParts[c.head], "objects": storeParts[c.objects], "refs": storeParts[c.refs], "commondir": commonParts[c.common]} {
			if part != nil {
				part(t, filepath.Join(dir, name))
			}
		}
		if c.head == "dir-ref" {
			mustWrite(t, filepath.Join(dir, "HEAD/x"), "ref: refs/heads/main\n")
		}
		cmd := exec.Command("git", "rev-parse", "--absolute-git-dir")
		cmd.Dir = dir
		cmd.Env = append(gitEnv(top), "GIT_CEILING_DIRECTORIES="+top)
		out, err := cmd.CombinedOutput()
		git := err == nil && strings.TrimSpace(string(out)) == dir
		if git {
			nGit++
		}
		if got := isGitDirectory(dir); got != git {
			t.Errorf("%+v: isGitDirectory = %v, git takes it for a git directory: %v (%s)", c, got, git, bytes.TrimSpace(out))
		}
	}
	if nGit == 0 || nGit == len(cases) {
		t.Fatalf("git took %d of %d folders for git directories: the comparison tells nothing", nGit, len(cases))
	}
	t.Logf("git took %d of %d folders for git directories", nGit, len(cases))
}
