package harnessstate

// copilotMCPConfig writes the mcp-config.json a box of Copilot CLI starts with: no MCP server,
// from neither side. Copilot CLI 1.0.102 refuses a file without the mcpServers key ("Failed
// to start MCP Servers: Error: mcpServers: Required"), so the file is a valid empty one; the
// host's servers are not the box's (as for Claude Code), and a server a box adds is dropped
// at the next launch.
func copilotMCPConfig(_, _ []byte, _ string) ([]byte, error) {
	return []byte("{\n  \"mcpServers\": {}\n}\n"), nil
}
