// Package warmup does, in a process started ahead of its launch (a spare shim, a prestarted
// box-init, an early box-exec), the one-time work of code paths the launch takes, so that it is
// not on the launch's path.
package warmup

import (
	"encoding/json"
	"os"
	"os/signal"
	"reflect"
	"time"

	"golang.org/x/sys/unix"
)

// Do runs, in a process started ahead of its launch (a spare shim, a prestarted box-init,
// an early box-exec), the one-time work of code paths the launch takes, so that it is not on
// the launch's path: the runtime's signal handling (started by the first signal.Notify), the
// local time zone (loaded by the first log line), and the JSON decoding of the types in samples
// (pointers to what the launch decodes: encoding/json builds its per-type decoders on first
// use). On this machine kind each of these cost 1–2 ms
// on a launch's path, most of it faulting in code and data not touched before. It changes no
// state the launch sees: the signal is one whose default action is to be ignored, and Do's
// own subscription to it ends before it returns.
func Do(samples ...any) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGWINCH)
	signal.Stop(c) // (not Reset: a subscription made before Do keeps SIGWINCH)
	_, _ = time.Now().Local().Zone()
	for _, s := range samples {
		JSON(s)
	}
}

// JSON decodes into ptr (a pointer to a struct) a JSON document in which every struct,
// slice and map reachable from its type holds one element, so that encoding/json has built
// every decoder the real document needs.
func JSON(ptr any) {
	v := reflect.New(reflect.TypeOf(ptr).Elem()).Elem()
	fill(v, 0)
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return
	}
	_ = json.Unmarshal(b, ptr)
}

// fill gives every slice and map in v one element, recursively (to a bounded depth, for
// recursive types).
func fill(v reflect.Value, depth int) {
	if depth > 6 || !v.CanSet() {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // []byte is a base64 string
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return
		}
		m := reflect.MakeMap(v.Type())
		e := reflect.New(v.Type().Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(reflect.ValueOf("k").Convert(v.Type().Key()), e)
		v.Set(m)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	}
}
