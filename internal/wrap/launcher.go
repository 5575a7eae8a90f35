// Package wrap is wrap mode: the PATH-first launchers that make a managed program's plain name
// (claude, codex, …) run it boxed through `agentbox run --wait`, the lookup that finds the
// vendor's executable without ever finding a launcher, and the scanner that finds managed
// programs running natively (outside every box).
package wrap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/template"
)

// Header starts the second line of every launcher. A file carrying it is agentbox's own: the
// vendor lookup skips it, and uninstall removes only such files.
const Header = "# agentbox-launcher"

// DefaultPrefix is where launchers go: ahead of /usr/bin (where a distribution packages
// programs) and of vendor installs further down the system PATH.
const DefaultPrefix = "/usr/local/bin"

// Launcher describes one launcher script.
type Launcher struct {
	// Name is the command the launcher answers to (claude) and the program agentbox run boxes.
	Name string
	// Agentbox is the absolute path of the agentbox binary the launcher execs.
	Agentbox string
	// Vendor is the managed install (the vendor's executable), passed to agentbox run as
	// --program-path. "" means agentbox run looks Name up on PATH, skipping launchers.
	Vendor string
}

// launcherTmpl is parsed on first use: `agentbox run`, which links this package to recognise
// launchers, does not pay for it at start-up.
var launcherTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("launcher").Parse(launcherText))
})

const launcherText = `#!/bin/sh
` + Header + ` v1: {{.Name}} runs boxed (agentbox wrap mode). Do not edit: agentbox wrap uninstall removes it.
# It never runs {{.Name}} unboxed: when the box cannot start, agentbox prints why and exits 125.
agentbox={{.AgentboxQ}}
if [ ! -x "$agentbox" ]; then
	echo "{{.Name}}: $agentbox is missing; {{.Name}} runs only boxed on this machine (see docs/deploy.md)" >&2
	exit 125
fi
exec "$agentbox" run --wait{{if .Vendor}} --program-path {{.VendorQ}}{{end}} {{.Name}} -- "$@"
`

// Render returns the launcher script: POSIX sh, LF line endings.
func Render(l Launcher) ([]byte, error) {
	if !validName(l.Name) {
		return nil, fmt.Errorf("launcher name %q: not a command name", l.Name)
	}
	if !filepath.IsAbs(l.Agentbox) {
		return nil, fmt.Errorf("launcher %s: agentbox path %q is not absolute", l.Name, l.Agentbox)
	}
	if l.Vendor != "" && !filepath.IsAbs(l.Vendor) {
		return nil, fmt.Errorf("launcher %s: vendor path %q is not absolute", l.Name, l.Vendor)
	}
	for _, p := range []string{l.Agentbox, l.Vendor} {
		if strings.ContainsAny(p, "\n\r\x00") {
			return nil, fmt.Errorf("launcher %s: path %q holds a line break", l.Name, p)
		}
	}
	var b bytes.Buffer
	err := launcherTmpl().Execute(&b, struct {
		Launcher
		AgentboxQ, VendorQ string
	}{l, shellQuote(l.Agentbox), shellQuote(l.Vendor)})
	return b.Bytes(), err
}

// shellQuote quotes s as one POSIX sh word.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._+-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func validName(n string) bool {
	if n == "" || len(n) > 64 || n == "." || n == ".." || n[0] == '-' || n[0] == '.' {
		return false
	}
	return strings.Trim(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-") == ""
}

// IsLauncher reports whether file is an agentbox launcher: a #! script whose second line
// starts with Header. A file that cannot be read is not one.
func IsLauncher(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	return isLauncher(f)
}

func isLauncher(r io.Reader) bool {
	br := bufio.NewReader(io.LimitReader(r, 512))
	first, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(first, "#!") {
		return false
	}
	second, _ := br.ReadString('\n')
	return strings.HasPrefix(second, Header+" ") || strings.TrimRight(second, "\n") == Header
}

// LookPath finds name on path (a PATH value) like a shell does, except that it skips
// agentbox's launchers, relative directories and anything that is not an executable regular
// file: so it finds the vendor's executable even when a launcher comes first. It returns ""
// when there is none.
func LookPath(name, path string) string {
	if !validName(name) {
		return ""
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue
		}
		c := filepath.Join(dir, name)
		st, err := os.Stat(c)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			continue
		}
		if IsLauncher(c) {
			continue
		}
		return c
	}
	return ""
}
