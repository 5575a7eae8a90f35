package integrity

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// isGitDirectory reports whether git takes dir for a git directory, as git's
// is_git_directory (setup.c) decides: HEAD is a valid head ref (validHeadRef), and the common
// dir (dir, or the one its commondir file names) holds objects and refs that git may search
// (access X_OK, following symlinks). No config file is needed: git finds a repository without
// one (review 13: the scan wanted HEAD, objects and a config, and missed a folder whose
// commondir led to a config of the box's). Where git would stop (a commondir it cannot read)
// it counts as one: the scan reads what it can of it.
func isGitDirectory(dir string) bool {
	if !validHeadRef(filepath.Join(dir, "HEAD")) {
		return false
	}
	common := dir
	cf := filepath.Join(dir, "commondir")
	if _, err := os.Stat(cf); err == nil {
		// git's get_common_dir_noenv: the whole file, its trailing line ends dropped; it
		// dies on a file it cannot read or an empty one.
		b, err := os.ReadFile(cf)
		c := cString(strings.TrimRight(string(b), "\r\n"))
		if err != nil || len(b) == 0 {
			return true
		}
		if !filepath.IsAbs(c) {
			c = filepath.Join(dir, c)
		}
		common = c
	}
	return searchable(filepath.Join(common, "objects")) && searchable(filepath.Join(common, "refs"))
}

// validHeadRef reports whether git's validate_headref accepts the file at path: a symlink
// whose target starts with "refs/", or a file that starts with "ref:", blanks and "refs/", or
// with an object id in hex (40 or 64 digits; what follows them does not count). git reads at
// most 255 bytes of either, as a C string. A FIFO, on which git's open would wait forever,
// counts as valid (the scan does not wait, and does not judge what it cannot read).
func validHeadRef(path string) bool {
	fi, err := os.Lstat(path)
	switch {
	case err != nil:
		return false
	case fi.Mode()&os.ModeSymlink != 0:
		t, err := os.Readlink(path)
		return err == nil && strings.HasPrefix(t[:min(len(t), 255)], "refs/")
	case fi.IsDir():
		return false
	case !fi.Mode().IsRegular():
		return true
	}
	f, err := openNoFollow(path)
	if err != nil {
		return false
	}
	defer f.Close()
	buf := make([]byte, 255)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return false
	}
	s := cString(string(buf[:n]))
	if ref, ok := strings.CutPrefix(s, "ref:"); ok {
		if strings.HasPrefix(strings.TrimLeft(ref, " \t\n\r"), "refs/") {
			return true
		}
	}
	return hexPrefix(s, 64) || hexPrefix(s, 40)
}

// hexPrefix reports whether s starts with n hex digits (either case, as git's hexval).
func hexPrefix(s string, n int) bool {
	if len(s) < n {
		return false
	}
	for _, c := range s[:n] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
