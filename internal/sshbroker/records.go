package sshbroker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentbox/agentbox/internal/recordlimit"
)

// ReasonRateLimited marks the log line of a summary of lines the launch's record budget held
// back (internal/recordlimit).
const ReasonRateLimited = "rate_limited"

// line is one log line about a box's request or connection (an agent request, a leg
// connection, a connection refused), or the summary of those the rate limit held back.
type line struct {
	level slog.Level
	msg   string
	key   []any // the attributes that name what the line is about: a bounded set of values
	rest  []any // the attributes of one line only (a key's fingerprint, an error)
	// allowed marks the line of an operation the broker let through (a granted key's
	// signature, a leg's connection): written whatever the rate while the launch's row cap is
	// not reached (recordlimit.Limiter.AdmitAllowed), so that a flood of refusals cannot hide it.
	allowed bool
	// target is what a line of an agent request is about (the key's fingerprint), counted per
	// target in a summary (targets), so that the summary still names the keys asked for.
	target  string
	targets recordlimit.Tally
	count   int64
	in      int64 // bytes, summed in a summary
	out     int64
	first   time.Time
}

// recorder writes a launch's lines through its rate limit: a box that floods its agent
// socket or legs adds a bounded number of lines to the daemon's log.
type recorder struct {
	log *slog.Logger
	rl  recordlimit.Limiter[line]
}

func newRecorder(log *slog.Logger, budget *recordlimit.Budget, journal string) *recorder {
	r := &recorder{log: log}
	r.rl.Budget = budget
	r.rl.Journal, r.rl.Encode, r.rl.Decode = journal, encodeLine, decodeLine
	r.rl.Logf = func(f string, a ...any) { log.Error(fmt.Sprintf(f, a...)) }
	r.rl.Merge = func(sum, l *line) {
		if sum.count == 0 {
			*sum = line{level: l.level, msg: l.msg, key: l.key, first: l.first}
		}
		sum.count++
		if l.target != "" {
			sum.targets.Add(l.target)
		}
		sum.in += l.in
		sum.out += l.out
	}
	r.rl.Write = func(sum *line) {
		attrs := append(append([]any{}, sum.key...), "count", sum.count, "reason", ReasonRateLimited, "since", sum.first.Format(time.RFC3339))
		if sum.in != 0 || sum.out != 0 {
			attrs = append(attrs, "bytes_out", sum.out, "bytes_in", sum.in)
		}
		if t := sum.targets.String(); t != "-" {
			attrs = append(attrs, "targets", t)
		}
		r.log.Log(context.Background(), sum.level, sum.msg, attrs...)
	}
	return r
}

// ReplayRecords logs, with log, the summaries of the lines held back in journal by a launch's
// broker whose daemon was killed before it logged them (Options.Journal), and removes it; it
// returns the number of summaries logged.
func ReplayRecords(log *slog.Logger, journal string) (int, error) {
	return newRecorder(log, nil, journal).rl.Replay()
}

// lineJSON is a line as the journal keeps it: what a summary merges (the attributes of one
// line only are not kept).
type lineJSON struct {
	Level   slog.Level        `json:"level"`
	Msg     string            `json:"msg"`
	Key     []any             `json:"key,omitempty"`
	Target  string            `json:"target,omitempty"`
	Targets recordlimit.Tally `json:"targets,omitzero"`
	Count   int64             `json:"count,omitempty"`
	In      int64             `json:"in,omitempty"`
	Out     int64             `json:"out,omitempty"`
	First   time.Time         `json:"first"`
}

func encodeLine(l *line) ([]byte, error) {
	return json.Marshal(lineJSON{Level: l.level, Msg: l.msg, Key: l.key, Target: l.target, Targets: l.targets,
		Count: l.count, In: l.in, Out: l.out, First: l.first})
}

func decodeLine(b []byte, l *line) error {
	var j lineJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = line{level: j.Level, msg: j.Msg, key: j.Key, target: j.Target, targets: j.Targets, count: j.Count,
		in: j.In, out: j.Out, first: j.First}
	return nil
}

// write logs l, or counts it into its summary when the budget holds it back.
func (r *recorder) write(l line) {
	l.first = time.Now()
	var k strings.Builder
	k.WriteString(l.msg)
	for _, a := range l.key {
		if s, ok := a.(string); ok {
			k.WriteString(" " + s)
		}
	}
	admit := r.rl.Admit
	if l.allowed {
		admit = r.rl.AdmitAllowed
	}
	if !admit(k.String(), &l, l.first) {
		return
	}
	r.log.Log(context.Background(), l.level, l.msg, append(append([]any{}, l.key...), l.rest...)...)
}

// info and warn write a line whose attributes kv all name what it is about; keyed lines with
// attributes of their own use write.
func (r *recorder) info(msg string, kv ...any) {
	r.write(line{level: slog.LevelInfo, msg: msg, key: kv})
}
func (r *recorder) warn(msg string, kv ...any) {
	r.write(line{level: slog.LevelWarn, msg: msg, key: kv})
}
