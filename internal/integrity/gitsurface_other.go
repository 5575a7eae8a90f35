//go:build !linux

package integrity

import (
	"errors"
	"os"
	"time"
)

var errOutside = errors.New("leads out of the workspace")

// QuarantineSuffix begins the name of the folder beside a file moved aside that holds it.
const QuarantineSuffix = ".agentbox-quarantined-"

func readBeneath(ws, path string, max int64) ([]byte, error) { return nil, ErrNotSupported }

func readTailBeneath(ws, path string, max int64) ([]byte, error) { return nil, ErrNotSupported }

func openReadBeneath(ws, path string) (*os.File, error) { return nil, ErrNotSupported }

func moveAside(ws, path string) (string, error) { return "", ErrNotSupported }

func stripPackedReplace(ws, path string, keep []string) (int, string, error) {
	return 0, "", ErrNotSupported
}

func packedReplaceAt(ws, path string) ([]string, error) { return nil, ErrNotSupported }

func restoreOwnerAccess(dir string) error { return ErrNotSupported }

func removeSpecial(ws, path string) (bool, string) { return false, "" }

func editIndex(ws, path string, ed indexEdit, beside bool) (indexEdited, error) {
	return indexEdited{}, ErrNotSupported
}

func readIndexRange(ws, path string, start, end int) ([]byte, error) {
	return nil, ErrNotSupported
}

func readIndex(ws, path string, hashLen int) ([]byte, time.Time, []indexEntry, []indexExtension, error) {
	return nil, time.Time{}, nil, nil, ErrNotSupported
}

type staleEntry struct{ name, sig string }

func staleEntries(ws string, ix *gitIndex, since int64, memo *blobMemo) []staleEntry { return nil }

func (s *State) stagedProtected(ix *gitIndex) []Transition { return nil }

// blobMemo is the Linux check's; elsewhere there is nothing to share.
type blobMemo struct{}

func flaggedChanged(ws string, ix *gitIndex, since int64, names []string) []string { return nil }

func (s *State) verifyObjects(gitdirs []string, since int64) []Transition { return nil }

func (s *State) verifyWorktreeRecords(tops []string) []Transition { return nil }
