package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/invopop/jsonschema"
)

// SchemaID is the $id of the generated schema.
const SchemaID = "https://github.com/agentbox/agentbox/docs/config.schema.json"

// Schema returns the JSON Schema of config.yaml and policy.yaml, generated from Config: every
// key is optional, unknown keys are refused, enumerations list their values and each key's
// default is the one Defaults returns. The bytes are deterministic (indented, newline-terminated).
func Schema() []byte {
	r := &jsonschema.Reflector{
		ExpandedStruct:             true,
		DoNotReference:             true,
		RequiredFromJSONSchemaTags: true, // every key is optional
	}
	s := r.Reflect(&Config{})
	s.ID = SchemaID
	s.Title = "agentbox configuration"
	s.Description = "User config ($XDG_CONFIG_HOME/agentbox/config.yaml) and system policy (/etc/agentbox/policy.yaml). Keys set in the policy outrank and lock the user's."
	d := Defaults()
	for _, l := range leaves() {
		p := s
		for _, name := range strings.Split(l.path, ".") {
			next, ok := p.Properties.Get(name)
			if !ok {
				panic(fmt.Sprintf("config: schema has no property %q", l.path))
			}
			p = next
		}
		p.Default = d.fieldByIndex(l.index).Interface()
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("config: marshal schema: " + err.Error())
	}
	return append(b, '\n')
}
