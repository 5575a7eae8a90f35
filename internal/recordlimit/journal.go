package recordlimit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentbox/agentbox/internal/atomicfile"
)

// JournalMax is the size past which a Limiter's journal is compacted when Limiter.JournalMax
// is zero: rewritten as the summaries it holds, one line per key, and synced to disk. It
// bounds the journal of a flooding launch's broker on disk and the records a power cut can
// take from it; each compaction costs a sync (BenchmarkHeld, docs/benchmarks.md).
const JournalMax = 1 << 20

// flushingSuffix names a journal whose summaries are being written (Limiter.flush): the
// records held back meanwhile go to a new journal at the Limiter's path.
const flushingSuffix = ".flushing"

// entry is one line of a journal: a record held back under Key (Rec), or, after a compaction,
// the summary of Key so far (Sum).
type entry struct {
	Key string          `json:"k"`
	Rec json.RawMessage `json:"r,omitempty"`
	Sum json.RawMessage `json:"s,omitempty"`
}

// journal is the open journal of a Limiter; the Limiter's lock guards it.
type journal struct {
	f    *os.File
	size int64
}

// journalHold appends rec, held back under key, to the journal; l.mu is held. A journal that
// cannot be written is reported once per file and the records stay counted in memory.
func (l *Limiter[R]) journalHold(key string, rec *R) {
	if l.Journal == "" || l.jbroken {
		return
	}
	if err := l.journalAppend(key, rec); err != nil {
		l.jbroken = true
		l.journalClose()
		l.logf("journal of held records %s: %v; the records held back are counted in memory only", l.Journal, err)
	}
}

func (l *Limiter[R]) journalAppend(key string, rec *R) error {
	if l.j == nil {
		if err := os.MkdirAll(filepath.Dir(l.Journal), 0o700); err != nil {
			return err
		}
		// A journal left at this path was replayed (Replay) before this Limiter was made.
		f, err := os.OpenFile(l.Journal, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		l.j = &journal{f: f}
	}
	b, err := l.encode(rec)
	if err != nil {
		return err
	}
	line, err := json.Marshal(entry{Key: key, Rec: b})
	if err != nil {
		return err
	}
	// One write: a daemon killed at any point leaves whole lines, and at most the last one cut.
	n, err := l.j.f.Write(append(line, '\n'))
	l.j.size += int64(n)
	if err != nil {
		return err
	}
	jmax := l.JournalMax
	if jmax <= 0 {
		jmax = JournalMax
	}
	if l.j.size > jmax {
		return l.journalCompact()
	}
	return nil
}

// journalCompact replaces the journal by the summaries held now, written as atomicfile writes a
// file (synced, renamed over the journal, its folder synced), and appends to that; l.mu is held.
func (l *Limiter[R]) journalCompact() error {
	var buf bytes.Buffer
	for _, k := range l.order {
		b, err := l.encode(l.held[k])
		if err != nil {
			return err
		}
		line, err := json.Marshal(entry{Key: k, Sum: b})
		if err != nil {
			return err
		}
		buf.Write(append(line, '\n'))
	}
	if err := atomicfile.WriteFile(l.Journal, buf.Bytes(), 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(l.Journal, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	l.j.f.Close()
	l.j = &journal{f: f, size: int64(buf.Len())}
	return nil
}

// journalClose closes the journal file; l.mu is held.
func (l *Limiter[R]) journalClose() {
	if l.j != nil {
		l.j.f.Close()
		l.j = nil
	}
}

// journalSetAside moves the journal of the summaries about to be written aside, so that the
// records held back meanwhile start a journal of their own; l.mu is held. It returns the
// path to remove once they are written ("" when there is none).
func (l *Limiter[R]) journalSetAside() string {
	if l.j == nil {
		return ""
	}
	l.journalClose()
	aside := l.Journal + flushingSuffix
	if err := os.Rename(l.Journal, aside); err != nil {
		l.logf("journal of held records %s: %v", l.Journal, err)
		return l.Journal
	}
	return aside
}

// Replay writes, with Write, the summaries of the records held back in the journal at
// l.Journal (and in one whose summaries were being written) by an earlier Limiter that did not
// write them — its daemon was killed —, calls Commit, and removes the journal. It returns the
// number of summaries written. Call it before the first Admit, on a Limiter set up
// as the one that wrote the journal (Merge, Write, Encode and Decode); without a journal it
// writes nothing. A line that cannot be read (the last one, cut by a power loss) is skipped and
// named in the error, after the others are written.
func (l *Limiter[R]) Replay() (int, error) {
	if l.Journal == "" {
		return 0, nil
	}
	held := map[string]*R{}
	var order []string
	var errs []error
	found := false
	paths := []string{l.Journal + flushingSuffix, l.Journal}
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("replay held records: %w", err)
		}
		found = true
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for n := 1; sc.Scan(); n++ {
			if err := l.replayLine(sc.Bytes(), held, &order); err != nil {
				errs = append(errs, fmt.Errorf("%s line %d: %w", p, n, err))
			}
		}
		if err := sc.Err(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
		}
		f.Close()
	}
	if !found {
		for _, p := range l.compactionTemps() {
			os.Remove(p)
		}
		return 0, nil
	}
	for _, k := range order {
		l.Write(held[k])
	}
	if l.Commit != nil {
		l.Commit()
	}
	for _, p := range append(paths, l.compactionTemps()...) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return len(order), fmt.Errorf("replay held records: %w", errors.Join(errs...))
	}
	return len(order), nil
}

// compactionTemps returns the temporary files of compactions (journalCompact) that a daemon
// killed while it wrote one left beside the journal, and the fixed name an earlier agentbox
// used for them.
func (l *Limiter[R]) compactionTemps() []string {
	tmps, _ := filepath.Glob(filepath.Join(filepath.Dir(l.Journal), "."+filepath.Base(l.Journal)+".tmp-*"))
	tmps = slices.DeleteFunc(tmps, func(p string) bool { return !atomicfile.IsTemp(filepath.Base(p)) })
	return append(tmps, l.Journal+".tmp")
}

// replayLine merges one journal line into held. A summary line starts its key afresh: after a
// compaction it is the whole of what was held under it.
func (l *Limiter[R]) replayLine(line []byte, held map[string]*R, order *[]string) error {
	var e entry
	if err := json.Unmarshal(line, &e); err != nil {
		return err
	}
	s := held[e.Key]
	switch {
	case e.Sum != nil:
		sum := new(R)
		if err := l.decode(e.Sum, sum); err != nil {
			return err
		}
		if s == nil {
			*order = append(*order, e.Key)
		}
		held[e.Key] = sum
	case e.Rec != nil:
		rec := new(R)
		if err := l.decode(e.Rec, rec); err != nil {
			return err
		}
		if s == nil {
			s = new(R)
			held[e.Key] = s
			*order = append(*order, e.Key)
		}
		l.Merge(s, rec)
	default:
		return errors.New("neither a record nor a summary")
	}
	return nil
}

func (l *Limiter[R]) encode(r *R) ([]byte, error) {
	if l.Encode != nil {
		return l.Encode(r)
	}
	return json.Marshal(r)
}

func (l *Limiter[R]) decode(b []byte, r *R) error {
	if l.Decode != nil {
		return l.Decode(b, r)
	}
	return json.Unmarshal(b, r)
}

func (l *Limiter[R]) logf(format string, args ...any) {
	if l.Logf != nil {
		l.Logf(format, args...)
	}
}
