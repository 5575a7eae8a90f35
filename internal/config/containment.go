package config

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/goccy/go-yaml/ast"
)

// Containment is wrap mode (docs/deploy.md): the programs that run boxed by policy through
// PATH-first launchers (`agentbox wrap install`), and what the daemon does about a native,
// unboxed run of one of them. Only the system policy may set it. The zero value manages no
// program.
type Containment struct {
	// Programs are the managed programs. Nil means none: no launcher is rendered and the
	// violation scanner does not run.
	Programs []ContainedProgram `json:"programs,omitempty" jsonschema_description:"Managed programs: each gets a PATH-first launcher that runs it boxed (agentbox wrap install), and a native run of it is a violation."`
	// Violations is the posture towards a native run of a managed program: report (record it)
	// or terminate (record it and kill the process). "" means report.
	Violations string `json:"violations,omitempty" jsonschema:"enum=report,enum=terminate" jsonschema_description:"What the daemon does about a managed program running outside any box: report (record it) or terminate (record it and kill it)."`
	// ScanInterval is how often the daemon looks for native runs (besides on demand). Zero
	// means 10s.
	ScanInterval Duration `json:"scanInterval,omitempty" jsonschema_description:"How often the daemon looks for managed programs running outside any box (Go duration; default 10s)."`
}

// ContainedProgram is one managed program.
type ContainedProgram struct {
	// Name is the command the launcher is named after (claude, codex, …); launches resolve it
	// to a profile like `agentbox run NAME` does.
	Name string `json:"name" jsonschema_description:"Command name of the program (claude, codex, …): the launcher's file name and the program agentbox run boxes."`
	// Path is the managed install: the vendor's executable (absolute). "" means it is looked up
	// on PATH, skipping agentbox's own launchers.
	Path string `json:"path,omitempty" jsonschema_description:"Absolute path of the vendor's executable (the managed install); empty: looked up on PATH, skipping agentbox launchers."`
}

// Violation postures.
const (
	ViolationsReport    = "report"
	ViolationsTerminate = "terminate"
)

// commandNameRE is what a managed program's name may be: a file name a shell finds on PATH.
var commandNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$`) })

// validateContainment checks the managed programs: valid, distinct command names (never
// agentbox itself) and absolute, clean paths.
func validateContainment(file string, body ast.Node, c *Config) error {
	seen := map[string]bool{}
	for i, p := range c.Containment.Programs {
		path := []string{"containment", "programs", "[" + strconv.Itoa(i) + "]"}
		at := func(key, msg string) error {
			p := append(append([]string{}, path...), key)
			n := nodeAt(body, p)
			if n == nil {
				n = nodeAt(body, path)
			}
			return errorAt(file, n, joinField(p), msg)
		}
		switch {
		case !commandNameRE().MatchString(p.Name):
			return at("name", fmt.Sprintf("invalid program name %q (a command name: letters, digits and . _ + -, no /)", p.Name))
		case p.Name == "agentbox":
			return at("name", "agentbox cannot manage itself")
		case seen[p.Name]:
			return at("name", fmt.Sprintf("program %q is listed twice", p.Name))
		}
		seen[p.Name] = true
		if p.Path != "" && (!filepath.IsAbs(p.Path) || filepath.Clean(p.Path) != p.Path || strings.ContainsAny(p.Path, "\n\x00")) {
			return at("path", fmt.Sprintf("invalid path %q (an absolute, clean path to the vendor's executable)", p.Path))
		}
	}
	return nil
}
