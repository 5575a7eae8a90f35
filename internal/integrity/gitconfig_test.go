package integrity

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// entryHolds is NestedConfigFile's rule for one entry, as its fields' comments state it: an
// anchored Dir is a path.Match pattern of the whole folder and Name one of the file's name; a
// Name "" entry holds for every file beneath its Dir (but in a folder pinned as a root); any
// other entry's Name is a filepath.Match pattern and its Dir the folder's last components.
func entryHolds(f NestedConfigFile, rel, name string, pinned func(string) bool) bool {
	if d, anchored := strings.CutPrefix(f.Dir, "/"); anchored {
		dok, _ := path.Match(d, rel)
		nok, _ := path.Match(f.Name, name)
		return dok && nok
	}
	if f.Name == "" {
		return beneathDir(rel, f.Dir) && !pinnedFolder(rel, f.Dir, pinned)
	}
	ok, _ := filepath.Match(f.Name, name)
	return ok && (f.Dir == "" || inDir(rel, f.Dir))
}

// TestNestedMatcherFirstEntry: the matcher the scan makes once per folder (nestedMatcher:
// literal names looked up, patterns pre-filtered by their literal ends) finds, for every
// folder and name tried, the Reads of the first entry whose rule holds (entryHolds), or none:
// the same answer as taking the entries one by one, which it replaced for speed.
func TestNestedMatcherFirstEntry(t *testing.T) {
	files := nestedFiles([]NestedConfigFile{
		{Dir: "/.", Name: "lefthook*.yml", Reads: "anchored top pattern"},
		{Dir: "/ci/*", Name: "b.yml", Reads: "anchored folder pattern"},
		{Dir: "/x", Name: "", Reads: "anchored, no name"},
		{Dir: "", Name: `\*x`, Reads: "escaped star"},
		{Dir: "", Name: "[ab]c*", Reads: "class"},
		{Dir: "", Name: "[x]]q", Reads: "a bracket after a class"},
		{Dir: "", Name: "a*a", Reads: "overlapping ends"},
		{Dir: "sub", Name: ".mcp.json", Reads: "a later entry of an earlier name"},
		{Dir: "", Name: "[", Reads: "bad pattern"},
		{Dir: "hooks", Name: "", Reads: "a later folder entry"},
	})
	names := []string{"f1.txt", "x.code-workspace", ".code-workspace", "code-workspace", "settings.json",
		"settings.local.json", "settingsjson", "lefthook.yml", "lefthook-local.yml", "b.yml", "*x", "xx",
		"ac", "bcd", "cc", "x]q", "]q", "a", "aa", "aba", "[", "config", "config.toml", "hooks.json",
		".mcp.json" + QuarantineSuffix + "1", "x" + QuarantineSuffix + "1.code-workspace", "tasks.json"}
	for _, f := range files {
		if f.Name != "" {
			names = append(names, f.Name)
		}
	}
	rels := []string{".", "d3", "src/d3", ".claude", "a/.claude", ".claude/hooks", ".claude/hooks/deep",
		"ci", "ci/x", "ci/x/y", "x", ".github", ".github/copilot", ".codex", "p/.codex/sub", "vendor",
		".mvn/wrapper", "gradle/wrapper", ".vscode", "sub", ".cargo", ".lefthook"}
	pins := map[string]func(string) bool{
		"none":   nil,
		"pinned": func(folder string) bool { return folder == ".codex" || folder == ".claude/hooks" },
	}
	tried, found := 0, 0
	for pname, pinned := range pins {
		for _, rel := range rels {
			m := newNestedMatcher(files, rel, pinned)
			for _, name := range names {
				// A name holding QuarantineSuffix is matched as any other: the scan passes
				// over what the launch's checks moved aside by their record (passOver).
				want := ""
				for _, f := range files {
					if entryHolds(f, rel, name, pinned) {
						want = f.Reads
						break
					}
				}
				tried++
				if want != "" {
					found++
				}
				if got := m.match(name); got != want {
					t.Errorf("%s: folder %q, name %q: matched %q, want %q", pname, rel, name, got, want)
				}
			}
		}
	}
	if found == 0 || found == tried {
		t.Fatalf("%d of %d tried found: the cases do not tell a matcher from a constant", found, tried)
	}
}

// TestLocalRemote: the remote URLs git opens as a path on this machine (url_is_local_not_ssh),
// whose hooks its fetch and push run there, against those it reaches over a transport.
func TestLocalRemote(t *testing.T) {
	for u, want := range map[string]string{
		"/srv/r.git":                 "/srv/r.git",
		"../r.git":                   "../r.git",
		"r":                          "r",
		"./a:b":                      "./a:b",
		"~/r.git":                    "~/r.git",
		"file:///srv/r.git":          "/srv/r.git",
		"file://localhost/srv/r.git": "/srv/r.git",
		"https://git.example.org/r":  "",
		"ssh://git.example.org/r":    "",
		"git@git.example.org:r.git":  "",
		"host:dir/r":                 "",
		"ext::sh -c x":               "",
		"":                           "",
	} {
		p, local := localRemote(u)
		if local != (want != "") || p != want && local {
			t.Errorf("localRemote(%q) = %q, %v; want %q", u, p, local, want)
		}
	}
}
