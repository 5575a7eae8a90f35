package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentbox/agentbox/internal/atomicfile"
	"github.com/agentbox/agentbox/internal/egress"
	"github.com/agentbox/agentbox/internal/sshbroker"
)

// heldDir, in the state directory, holds the journals of the records the brokers' rate limits
// hold back (recordlimit.Limiter.Journal): one file per launch and kind of record, named
// "<launch id>.<kind>", removed once their summaries are written; a daemon killed before then
// leaves them, and the next writes their summaries at its start (replayHeld).
const heldDir = "held"

// The kinds of record whose held-back records a journal keeps, each a file's extension.
const (
	heldEgress = "egress"
	heldRelay  = "relay"
	heldGit    = "git"
	heldSSH    = "ssh"
)

// Journal names of the record budgets that are not a launch's (broker_relay.go).
const (
	heldManual   = "manual"   // the sessions made by hand, which share one budget
	heldUnpaired = "unpaired" // the requests on the shared listener whose pairing is refused
)

// heldJournal returns the journal of the records of kind held back for budget id (a launch
// id, "" for the sessions made by hand, unpairedRecords for refused pairings), or "" when the
// daemon has no state directory (some tests).
func heldJournal(stateDir, id, kind string) string {
	if stateDir == "" {
		return ""
	}
	switch id {
	case "":
		id = heldManual
	case unpairedRecords:
		id = heldUnpaired
	}
	return filepath.Join(stateDir, heldDir, id+"."+kind)
}

// replayHeld writes the summaries of the records that the brokers of an earlier daemon held
// back and did not write — it was killed — from their journals, into the log and the store,
// before any launch is re-adopted: a re-adopted launch's counters then count them, and its
// brokers start new journals. A journal that cannot be read whole is reported, its readable
// records written, and removed: it is not read twice.
func (d *Daemon) replayHeld() {
	dir := filepath.Join(d.stateDir, heldDir)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err != nil {
		d.log.Error("replay the records held back by the last daemon", "err", err)
		return
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		if atomicfile.IsTemp(n) { // a compaction's temporary file: its journal's replay removes it
			n = n[1:strings.LastIndex(n, ".tmp-")]
		}
		for _, suf := range []string{".flushing", ".tmp"} {
			n = strings.TrimSuffix(n, suf)
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	for _, n := range names {
		id, kind, _ := strings.Cut(n, ".")
		budget := id
		switch id {
		case heldManual:
			budget = ""
		case heldUnpaired:
			budget = unpairedRecords
		}
		var sums int
		var err error
		switch kind {
		case heldEgress:
			sums, err = d.egress.replay(id, heldJournal(d.stateDir, id, kind))
		case heldRelay, heldGit:
			sums, err = d.relay.replay(budget, kind)
		case heldSSH:
			sums, err = sshbroker.ReplayRecords(d.log.With("launch", id), heldJournal(d.stateDir, id, kind))
		default:
			err = fmt.Errorf("%s is not a journal of held records", filepath.Join(dir, n))
		}
		if err != nil {
			d.log.Error("replay the records held back by the last daemon", "launch", id, "kind", kind, "summaries", sums, "err", err)
			continue
		}
		d.log.Warn("records held back by the last daemon, which ended without writing them, written from its journal",
			"launch", id, "kind", kind, "summaries", sums)
	}
}

// replay writes the summaries of launch id's egress records held back in journal.
func (b *egressBroker) replay(id, journal string) (int, error) {
	p := &egress.Proxy{
		Logf:    func(f string, a ...any) { b.Log.Info(fmt.Sprintf(f, a...), "broker", "egress") },
		Audit:   func(r egress.Record) { b.audit(id, r) },
		Journal: journal,
		Commit:  b.commit,
	}
	return p.ReplayRecords()
}

// commit returns once the audit rows queued are committed.
func (b *egressBroker) commit() {
	if b.Audits != nil {
		b.Audits.Sync()
	}
}
