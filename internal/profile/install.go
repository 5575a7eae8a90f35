package profile

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/plan"
)

// maxPackageDepth bounds how far above the executable FindInstall looks for the package root.
const maxPackageDepth = 8

// FindInstall returns the install tree of program (an absolute host path, symlinks already
// resolved or not): the nearest ancestor directory whose package.json names one of the
// profile's packages (npm's global bin links point into it), else nil (plan.Build binds the
// executable file itself). For a script whose #! line runs the profile's interpreter through
// env, the interpreter is looked up on path (a PATH value) and its prefix (the directory above
// its bin/) is returned too when it lies outside the system directories.
func (p *Profile) FindInstall(program, path string) (*InstallTree, error) {
	real, err := filepath.EvalSymlinks(program)
	if err != nil {
		return nil, err
	}
	t := &InstallTree{}
	if len(p.Install.Packages) > 0 {
		dir := filepath.Dir(real)
		for range maxPackageDepth {
			if name := packageName(filepath.Join(dir, "package.json")); name != "" && slices.Contains(p.Install.Packages, name) {
				t.Tree = dir
				break
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	if p.Install.Interpreter != "" && scriptRuns(real, p.Install.Interpreter) {
		if ip := lookPath(p.Install.Interpreter, path); ip != "" {
			if r, err := filepath.EvalSymlinks(ip); err == nil && filepath.Base(filepath.Dir(r)) == "bin" {
				prefix := filepath.Dir(filepath.Dir(r))
				if !underAny(prefix, plan0SystemDirs()) {
					t.Interpreter = prefix
				}
			}
		}
	}
	if t.Tree == "" && t.Interpreter == "" {
		return nil, nil
	}
	return t, nil
}

func packageName(file string) string {
	b, err := os.ReadFile(file)
	if err != nil || len(b) > 1<<20 {
		return ""
	}
	var pj struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(b, &pj) != nil {
		return ""
	}
	return pj.Name
}

// scriptRuns reports whether file starts with a #! line that runs interp (directly or
// through env).
func scriptRuns(file, interp string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := io.ReadFull(f, b)
	b = b[:n]
	if !bytes.HasPrefix(b, []byte("#!")) {
		return false
	}
	line, _, _ := bytes.Cut(b[2:], []byte("\n"))
	for _, w := range strings.Fields(string(line)) {
		if filepath.Base(w) == interp {
			return true
		}
	}
	return false
}

func lookPath(name, path string) string {
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		c := filepath.Join(dir, name)
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return c
		}
	}
	return ""
}

func underAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// plan0SystemDirs are the directories every box binds read-only already.
func plan0SystemDirs() []string { return plan.DefaultSystemDirs }
