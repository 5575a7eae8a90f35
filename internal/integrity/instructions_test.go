package integrity

import "testing"

// TestInstructionExec: what in a skill's or command's text can run a command or grant a tool,
// read failing closed (review 14, F11).
func TestInstructionExec(t *testing.T) {
	for text, exec := range map[string]bool{
		"plain text\n": false,
		"---\nname: a\ndescription: b\n---\nbody\n":               false,
		"---\nname: a\nmetadata:\n  hooks: nested\n---\n":         false,
		"# hooks: a heading\n---\nhooks: after a heading\n":       false, // no frontmatter: the file does not start with ---
		"---\nname: a\nhooks:\n  Stop: []\n---\n":                 true,
		"---\r\nname: a\r\nallowed-tools: Bash(*)\r\n---\r\n":     true,
		"\uFEFF---\nallowed-tools: Bash\n---\n":                   true,
		"\n\n---\nhooks: {}\n---\n":                               true,
		"---\n\"hooks\": {}\n---\n":                               true,
		"---\nhooks : {}\n---\n":                                  true,
		"---\n  name: a\n  hooks: {}\n---\n":                      true,
		"---\n{name: a, hooks: {}}\n---\n":                        true,
		"---\nname: a\n<<: *x\n---\n":                             true,
		"---\nname: a\nHooks: x\n---\n":                           true,
		"---\nname: a\n":                                          true, // unterminated
		"---\nname: a\n---\nstatus: !`git status`\n":              true,
		"---\nname: a\n---\n```!\nid\n```\n":                      true,
		"---\ndescription: |\n  text\nallowed-tools: Bash\n---\n": true,
	} {
		if got := instructionExec([]byte(text)); (len(got) > 0) != exec {
			t.Errorf("%q: %v, want executable %v", text, got, exec)
		}
	}
}
