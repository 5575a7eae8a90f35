package api

// Managed sources of Claude Code's managed settings, as Posture.Source reports them.
const (
	// PostureSourceFile: the file-based managed settings (managed-settings.json and the
	// managed-settings.d drop-ins under /etc/claude-code).
	PostureSourceFile = "file"
	// PostureSourceNone: no managed settings file exists; Claude Code runs unmanaged (unless
	// server-managed settings reach it, which the host cannot see).
	PostureSourceNone = "none"
	// PostureSourceUnknown: the managed settings could not be read; the locks are reported off.
	PostureSourceUnknown = "unknown"
)

// Posture is the managed posture Claude Code runs under on this host: which managed source it
// uses and whether agentbox's locks are on. It is read fresh for every /v0/info request and
// recorded with each launch. A read error reports PostureSourceUnknown with the locks off,
// never locked.
type Posture struct {
	// Source is PostureSourceFile, PostureSourceNone or PostureSourceUnknown.
	Source string `json:"source"`
	// Files are the managed files read, in Claude Code's merge order.
	Files []string `json:"files,omitempty"`
	// AllowManagedHooksOnly and AllowManagedMcpServersOnly are the locks as Claude Code will
	// see them (the merged value of the managed files).
	AllowManagedHooksOnly      bool `json:"allowManagedHooksOnly"`
	AllowManagedMcpServersOnly bool `json:"allowManagedMcpServersOnly"`
	// AllowedMcpServers is the number of allowedMcpServers entries.
	AllowedMcpServers int `json:"allowedMcpServers,omitempty"`
	// AutoUpdatesDisabled is true when the managed settings turn the vendor updater off.
	AutoUpdatesDisabled bool `json:"autoUpdatesDisabled"`
	// Error says why the posture is unknown.
	Error string `json:"error,omitempty"`
}

// Profile is one program profile as `agentbox profiles` lists it.
type Profile struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Origin      string   `json:"origin"` // builtin or config
	Executables []string `json:"executables,omitempty"`
	// Found is where the first executable was found on PATH ("" when not found), Resolved its
	// real path and Tree the install tree bound read-only in its boxes.
	Found    string `json:"found,omitempty"`
	Resolved string `json:"resolved,omitempty"`
	Tree     string `json:"tree,omitempty"`
	// Provider is the relay provider it is wired to ("" for none), Model the configured one.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
}
