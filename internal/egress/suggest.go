package egress

import "slices"

// Suggestions are the allowlist entries each package ecosystem needs, documented in
// docs/egress.md. They are never added on their own: a refusal of one of these hosts names
// its ecosystem's list so the user can add it deliberately.
var Suggestions = map[string][]string{
	"npm":   {"registry.npmjs.org"},
	"pip":   {"pypi.org", "files.pythonhosted.org"},
	"go":    {"proxy.golang.org", "sum.golang.org"},
	"cargo": {"index.crates.io", "static.crates.io"},
}

// Suggested returns the ecosystem whose suggested entries include the host name, or "".
func Suggested(name string) string {
	for _, eco := range []string{"cargo", "go", "npm", "pip"} {
		if slices.Contains(Suggestions[eco], name) {
			return eco
		}
	}
	return ""
}
