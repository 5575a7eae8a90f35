package broker

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentbox/agentbox/internal/plan"
)

// fake is a broker that adds its name to the environment, records its calls in log, and fails
// its Prepare when fail is set. seen is the environment it found when it prepared.
type fake struct {
	name string
	fail bool
	log  *calls
	seen []string
}

type calls struct {
	mu sync.Mutex
	l  []string
}

func (c *calls) add(s string) { c.mu.Lock(); c.l = append(c.l, s); c.mu.Unlock() }

func (f *fake) Name() string { return f.name }
func (f *fake) Prepare(_ context.Context, _ *Launch, c *plan.Contributions) error {
	f.log.add("prepare " + f.name)
	f.seen = slices.Clone(c.Env)
	if f.fail {
		return errors.New("refused")
	}
	c.Env = append(c.Env, f.name+"=1")
	return nil
}
func (f *fake) Resume(context.Context, *Launch) error { f.log.add("resume " + f.name); return nil }
func (f *fake) End(id string)                         { f.log.add("end " + f.name) }

type independentFake struct{ *fake }

func (independentFake) Independent() {}

// TestListPrepare: contributions arrive in list order whatever finished first; a dependent
// broker sees what the dependent ones before it added and nothing of an independent one.
func TestListPrepare(t *testing.T) {
	log := &calls{}
	a, ind, b := &fake{name: "A", log: log}, &fake{name: "I", log: log}, &fake{name: "B", log: log}
	l := List{Brokers: []Broker{a, independentFake{ind}, b}}
	c := plan.Contributions{Env: []string{"BASE=1"}}
	if err := l.Prepare(context.Background(), &Launch{ID: "x"}, &c); err != nil {
		t.Fatal(err)
	}
	if want := []string{"BASE=1", "A=1", "I=1", "B=1"}; !reflect.DeepEqual(c.Env, want) {
		t.Errorf("env %v, want %v", c.Env, want)
	}
	if want := []string{"A=1"}; !reflect.DeepEqual(b.seen, want) {
		t.Errorf("B saw %v, want %v (what A added, nothing of the independent one)", b.seen, want)
	}
	if len(ind.seen) != 0 {
		t.Errorf("the independent broker saw %v, want nothing", ind.seen)
	}
}

// TestListPrepareFails: when a broker refuses, the brokers prepared before it and the
// independent ones are ended, the ones after it never prepare, the error names the broker, and
// the contributions are left as they were.
func TestListPrepareFails(t *testing.T) {
	log := &calls{}
	a, ind, b, after := &fake{name: "A", log: log}, &fake{name: "I", log: log}, &fake{name: "B", fail: true, log: log}, &fake{name: "C", log: log}
	l := List{Brokers: []Broker{a, independentFake{ind}, b, after}}
	c := plan.Contributions{Env: []string{"BASE=1"}}
	err := l.Prepare(context.Background(), &Launch{ID: "x"}, &c)
	if err == nil || err.Error() != "B: refused" {
		t.Fatalf("Prepare = %v, want B: refused", err)
	}
	if want := []string{"BASE=1"}; !reflect.DeepEqual(c.Env, want) {
		t.Errorf("env %v after a failure, want %v", c.Env, want)
	}
	got := slices.Clone(log.l)
	for _, want := range []string{"end A", "end I"} {
		if !slices.Contains(got, want) {
			t.Errorf("calls %v lack %q", got, want)
		}
	}
	for _, never := range []string{"prepare C", "end B", "end C"} {
		if slices.Contains(got, never) {
			t.Errorf("calls %v hold %q", got, never)
		}
	}
}

// endWaiter is an independent broker whose End waits for another broker's End to have begun.
type endWaiter struct {
	*fake
	other <-chan struct{}
}

func (endWaiter) Independent() {}
func (w endWaiter) End(id string) {
	select {
	case <-w.other:
		w.log.add("end " + w.name + " after the other began")
	case <-time.After(10 * time.Second):
		w.log.add("end " + w.name + " alone")
	}
}

// endSignaller is a dependent broker whose End says it began.
type endSignaller struct {
	*fake
	began chan struct{}
}

func (s endSignaller) End(id string) { close(s.began); s.fake.End(id) }

// TestListEndIndependentAlongside: an independent broker ends alongside the dependent ones (the
// integrity check at exit while the relay commits the session's end), and End returns only
// once every broker has ended. Ended one after the other, the independent broker's End would
// wait for a dependent one that had not begun, and log that it ended alone.
func TestListEndIndependentAlongside(t *testing.T) {
	log := &calls{}
	began := make(chan struct{})
	ind := endWaiter{&fake{name: "I", log: log}, began}
	dep := endSignaller{&fake{name: "A", log: log}, began}
	l := List{Brokers: []Broker{ind, dep, &fake{name: "B", log: log}}}
	l.End("x")
	got := slices.Clone(log.l)
	slices.Sort(got)
	if want := []string{"end A", "end B", "end I after the other began"}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls %v, want %v", got, want)
	}
}
