package api

import "time"

// Routes of wrap mode's violation scanner.
const (
	RouteViolations     = "/v0/violations"      // GET the posture, the counts and recent violations
	RouteViolationsScan = "/v0/violations/scan" // POST scan now; answers Violations with Found
)

// Violation actions.
const (
	ViolationReported        = "reported"         // recorded (posture report)
	ViolationTerminated      = "terminated"       // recorded and killed (posture terminate)
	ViolationTerminateFailed = "terminate_failed" // posture terminate, but the kill failed (Error says why)
)

// Violation is a managed program found running outside every box.
type Violation struct {
	ID   int64     `json:"id"`
	Time time.Time `json:"time"`
	// Program is the managed program's name; Path its canonical executable.
	Program string `json:"program"`
	Path    string `json:"path"`
	// Pid and StartTime name the process; Exe is its executable as the kernel names it.
	Pid       int    `json:"pid"`
	StartTime uint64 `json:"startTime,omitempty"`
	Exe       string `json:"exe,omitempty"`
	// PPid and ParentExe describe the parent that started it.
	PPid      int      `json:"ppid"`
	ParentExe string   `json:"parentExe,omitempty"`
	UID       int      `json:"uid"`
	Cmdline   []string `json:"cmdline,omitempty"`
	// Action is what the daemon did: reported, terminated or terminate_failed.
	Action string `json:"action"`
	Error  string `json:"error,omitempty"`
}

// ManagedProgram is one program of containment.programs as the scanner resolved it.
type ManagedProgram struct {
	Name string `json:"name"`
	// Path is the configured managed install ("" when looked up on the daemon's PATH).
	Path string `json:"path,omitempty"`
	// Executable is the canonical executable the scanner matches ("" when unresolved: Error
	// says why, and native runs of the program are not detected).
	Executable string `json:"executable,omitempty"`
	Script     bool   `json:"script,omitempty"`
	Error      string `json:"error,omitempty"`
}

// Violations is the state of wrap mode's violation scanner.
type Violations struct {
	// Posture is report or terminate; "" when no program is managed (the scanner is idle).
	Posture  string           `json:"posture,omitempty"`
	Programs []ManagedProgram `json:"programs,omitempty"`
	// Total counts the violations recorded; Terminated those killed.
	Total      int `json:"total"`
	Terminated int `json:"terminated"`
	// LastScan is when the last scan finished; ScanError why it failed ("" when it did not).
	LastScan  time.Time `json:"lastScan,omitzero"`
	ScanError string    `json:"scanError,omitempty"`
	// Recent are the latest violations, newest first.
	Recent []Violation `json:"recent,omitempty"`
	// Found are the violations the scan that answered this request recorded (POST scan only).
	Found []Violation `json:"found,omitempty"`
}
