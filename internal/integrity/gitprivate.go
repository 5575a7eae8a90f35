package integrity

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// A private git directory is how the daemon asks git about a repository whose configuration a
// box may have written (a nested repository a box made, one beyond the scan's bound, a
// submodule gitdir that is not pinned) without reading that configuration: git is pointed at a
// bare repository of the daemon's own, in a new temporary folder, whose configuration agentbox
// writes and whose only link to the repository is its object store, named as an alternate.
// Before, git merge-base ran in such a repository with its own configuration, and a box's
// extensions.partialClone with remote.<name>.uploadpack had the daemon's git run the box's
// command at the check at exit (a lazy fetch of a commit the box's branch named and that was
// not there); git ls-files --stage did the same for a box's sparse index.
//
// What git then reads of the repository is objects only: no configuration, hooks, replace
// refs or grafts, no commit-graph or multi-pack-index (caches whose ids and offsets git
// trusts; git 2.39's merge-base was not fooled by a forged commit-graph, which later versions
// may read more of), and no promisor remote, so that a missing object is an error, never a
// fetch. What is read through the alternate is data: an alternate of the repository's own
// (objects/info/alternates) is followed, as git follows alternates, and is read only.

// privateGitConfig is the configuration of every private git directory: the caches a box can
// forge off; core.bare so that git takes no work tree from its location.
const privateGitConfig = `[core]
	repositoryformatversion = %d
	bare = true
	commitGraph = false
	multiPackIndex = false
	fsmonitor = false
	untrackedCache = false
	hooksPath = /dev/null
`

// privateGitDir makes a private git directory that reads the objects of the git directory gd
// (its common dir: objects/ beneath it) and returns it; sha256 selects the object format. The
// caller removes it (os.RemoveAll). gd's shallow file, which only cuts a history short, is
// copied when it is a regular file beneath gd.
func privateGitDir(gd string, sha256 bool) (string, error) {
	objects, err := filepath.Abs(filepath.Join(gd, "objects"))
	if err != nil {
		return "", err
	}
	// git reads an alternates file by lines, unquoting one that starts with a double quote.
	if strings.ContainsAny(objects, "\n\r") || strings.HasPrefix(objects, `"`) {
		return "", fmt.Errorf("the path %q cannot be named as an alternate object store", objects)
	}
	dir, err := os.MkdirTemp("", "agentbox-git-")
	if err != nil {
		return "", err
	}
	version, format := 0, ""
	if sha256 {
		version, format = 1, "[extensions]\n\tobjectFormat = sha256\n"
	}
	files := map[string]string{
		"HEAD":                    "ref: refs/heads/agentbox\n",
		"config":                  fmt.Sprintf(privateGitConfig, version) + format,
		"objects/info/alternates": objects + "\n",
	}
	if b, err := readBeneath(gd, filepath.Join(gd, "shallow"), maxCheckedFile); err == nil {
		files["shallow"] = string(b)
	}
	for _, d := range []string{"refs", "objects/info"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

// privateGitEnv returns env (without the variables that point git elsewhere: hostGitEnv's)
// with git pointed at the private git directory dir: no replace refs, no lazy fetch (git 2.45
// and later; older ones have no promisor remote in dir to fetch from).
func privateGitEnv(env []string, dir string) []string {
	return append(env, "GIT_DIR="+dir, "GIT_NO_REPLACE_OBJECTS=1", "GIT_NO_LAZY_FETCH=1", "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
}
