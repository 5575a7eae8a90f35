package harnessstate

import "os"

// openFlags: Windows has no O_NOFOLLOW or FIFOs; the os.Root keeps opens beneath the directory.
const openFlags = 0

// replaceFile writes b to rel beneath root (Windows is built, never run: no boxes there).
func replaceFile(root *os.Root, rel string, b []byte) error { return root.WriteFile(rel, b, 0o600) }
