package wrap

import (
	"errors"
	"time"
)

// ErrNotSupported means the violation scanner does not run on this platform.
var ErrNotSupported = errors.New("the violation scanner is not supported on this platform")

// ErrNotInstalled means a managed program's executable was not found.
var ErrNotInstalled = errors.New("managed program not installed")

// FileID identifies a file: device and inode. Two paths name the same file exactly when their
// FileIDs are equal (a symlink, a hard link or a rename keeps it; a copy does not).
type FileID struct {
	Dev, Ino uint64
}

// Target is a managed program's canonical executable, as the scanner matches it.
type Target struct {
	// Name is the managed program's name (containment.programs[].name).
	Name string
	// Path is the executable with every symlink resolved.
	Path string
	// ID is the executable's identity.
	ID FileID
	// Script is true when the executable is a #! script: the kernel then runs its interpreter,
	// so a process runs it when its executable is one of Interpreters and its command line
	// names the script (by identity, resolved from the process's working directory).
	Script bool
	// Interpreters are the identities of the script's interpreter (for "#!/usr/bin/env node",
	// env and node as found on the scanner's PATH).
	Interpreters []FileID
}

// Process is a process found running a Target outside every box.
type Process struct {
	Pid int
	// StartTime is the start time in clock ticks since boot: with Pid it names one process.
	StartTime uint64
	// Exe is the process's executable as the kernel names it (/proc/PID/exe).
	Exe string
	// PPid and ParentExe describe its parent ("" when unreadable).
	PPid      int
	ParentExe string
	UID       int
	// Cmdline is the process's argv, bounded.
	Cmdline []string
}

// Finding is one managed program running natively.
type Finding struct {
	Target  Target
	Process Process
	Seen    time.Time
}
